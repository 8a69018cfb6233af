package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/schemaword"
)

var _ lockmgr.SchemaAnnouncer = (*Locker)(nil)

// DefaultSchemaPoll is how often a Locker reads the schema row by default.
const DefaultSchemaPoll = 100 * time.Millisecond

// schemaWord carries schema-change announcements through the T_ddl
// table: one row whose version every announcement raises, read by every
// Locker every SchemaPoll (the database cannot notify).
type schemaWord struct {
	st     *store
	id     string
	poll   time.Duration
	f      *schemaword.Follower
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *store) schemaTable() string { return s.tn.quoted("_ddl") }

func (s *store) schemaDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + s.schemaTable() + ` (
  id TINYINT NOT NULL,
  version BIGINT UNSIGNED NOT NULL,
  locker VARBINARY(64) NOT NULL COMMENT 'the Locker that announced last',
  PRIMARY KEY (id)
) ENGINE=InnoDB COMMENT='lockproxy schema-change announcements'`
}

func startSchemaWord(st *store, id string, poll time.Duration) *schemaWord {
	ctx, cancel := context.WithCancel(context.Background())
	w := &schemaWord{st: st, id: id, poll: poll, f: schemaword.New(id), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go w.follow()
	return w
}

func (w *schemaWord) stop() {
	w.cancel()
	<-w.done
}

// announce raises the row's version, creating the tables (and the
// database) when missing.
func (w *schemaWord) announce(ctx context.Context) error {
	if err := w.st.ensure(ctx); err != nil {
		return err
	}
	// LAST_INSERT_ID(expr) hands the raised version back in the OK
	// packet, so the follower knows this announcement as its own even
	// when its next read finds a later one of this Locker's on top.
	q := "INSERT INTO " + w.st.schemaTable() + " (id, version, locker) VALUES (1, 0, ?)" +
		" ON DUPLICATE KEY UPDATE version = LAST_INSERT_ID(version + 1), locker = VALUES(locker)"
	res, err := w.st.db.ExecContext(ctx, q, w.id)
	if noTable(err) {
		if _, err = w.st.db.ExecContext(ctx, w.st.schemaDDL()); err == nil {
			res, err = w.st.db.ExecContext(ctx, q, w.id)
		}
	}
	if err != nil {
		return w.st.wrap("announce a schema change", err)
	}
	if n, err := res.RowsAffected(); err == nil {
		switch id, err := res.LastInsertId(); {
		case n == 1: // the row made, at version 0
			w.f.Own(0)
		case n == 2 && err == nil:
			w.f.Own(id)
		}
	}
	return nil
}

// follow reads the row every poll until stop: a version another Locker
// raised is delivered, also one raised while the database was away.
func (w *schemaWord) follow() {
	defer close(w.done)
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		if v, by, err := w.read(); err == nil {
			w.f.Seen(v, by)
		}
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read returns the row's version and last announcer; version -1 when
// nothing was ever announced (no row, or no table).
func (w *schemaWord) read() (version int64, by string, err error) {
	ctx, cancel := context.WithTimeout(w.ctx, max(w.poll, time.Second))
	defer cancel()
	err = w.st.db.QueryRowContext(ctx, "SELECT version, locker FROM "+w.st.schemaTable()+" WHERE id = 1").Scan(&version, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows), noTable(err):
		return -1, "", nil
	case err != nil:
		return 0, "", err
	}
	return version, by, nil
}

func noTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erNoSuchTable
}

// AnnounceSchemaChange implements lockmgr.SchemaAnnouncer: one upsert of
// the schema row, bounded by ctx (OpTimeout without a deadline).
func (l *Locker) AnnounceSchemaChange(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opTimeout)
		defer cancel()
	}
	return l.word.announce(ctx)
}

// SchemaChanges implements lockmgr.SchemaAnnouncer: another Locker's
// announcement is delivered within SchemaPoll of its commit (plus one
// read of the row).
func (l *Locker) SchemaChanges() <-chan struct{} { return l.word.f.C() }
