package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.Observer = (*Locker)(nil)

// observeDDL creates the notes table of observe mode: one row per key
// and observing owner; seq is the note's place, kept when it is noted
// again.
func (t tableName) observeDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + t.quoted("_observe") + ` (
  kh BINARY(32) NOT NULL COMMENT 'SHA-256 of the lock key',
  own VARBINARY(1024) NOT NULL COMMENT 'observing owner id',
  seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'the note''s place',
  expires_at DATETIME(6) NOT NULL COMMENT 'database clock',
  PRIMARY KEY (kh, own),
  KEY seq_idx (seq)
) ENGINE=InnoDB COMMENT='lockproxy observe mode notes, beside the lock rows'`
}

// Observe implements lockmgr.Observer. Per key, an upsert of owner's
// note (its place kept when it exists, its end moved on by a ttl); and
// one read of the keys' lock rows and notes. They run at once, each on a
// connection of the pool: about one round trip. The lock rows are only
// read. A note ends with EndObserve or its ttl.
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if l.e.Closed() {
		return nil, lockmgr.ErrClosed
	}
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return nil, err
	}
	s := l.st
	found, err := s.observe(ctx, owner.ID(), keys)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erNoSuchTable {
		if _, err = s.db.ExecContext(ctx, s.tn.observeDDL()); err == nil {
			found, err = s.observe(ctx, owner.ID(), keys)
		}
	}
	if err != nil {
		return nil, s.wrap("observe", err)
	}
	return found, nil
}

// noteSeen is one row of the observe read: a lock row's holder (seq 0)
// or a note.
type noteSeen struct {
	own string
	seq uint64
}

func (s *store) observe(ctx context.Context, id string, keys []lockmgr.Key) (map[string][]string, error) {
	o, t := s.tn.quoted("_observe"), s.tn.quoted("")
	upsert := "INSERT INTO " + o + " (kh, own, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)" +
		" ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), seq = LAST_INSERT_ID(seq)"
	khs := make([]any, len(keys))
	for i, k := range keys {
		khs[i] = keyHash(k.Name)
	}
	in := placeholders(len(keys))
	read := "SELECT kh, own, 0 FROM " + t + " WHERE kh IN " + in + " AND owner IS NOT NULL AND expires_at > NOW(6)" +
		" UNION ALL SELECT kh, own, seq FROM " + o + " WHERE kh IN " + in + " AND expires_at > NOW(6)"

	mine := make([]uint64, len(keys))
	errs := make([]error, len(keys)+1)
	seen := map[string][]noteSeen{}
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.db.ExecContext(ctx, upsert, khs[i], id, s.ttl)
			if err == nil {
				var n int64
				n, err = res.LastInsertId()
				mine[i] = uint64(n)
			}
			errs[i] = err
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[len(keys)] = s.readNotes(ctx, read, append(slices.Clone(khs), khs...), seen)
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out map[string][]string
	for i, k := range keys {
		rows := seen[string(khs[i].([]byte))]
		// Holders (seq 0) first, then the notes made before owner's.
		slices.SortStableFunc(rows, func(a, b noteSeen) int {
			switch {
			case a.seq < b.seq:
				return -1
			case a.seq > b.seq:
				return 1
			}
			return 0
		})
		var others []string
		for _, r := range rows {
			if r.own != id && (r.seq < mine[i]) && !slices.Contains(others, r.own) {
				others = append(others, r.own)
			}
		}
		if len(others) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k.Name] = others
		}
	}
	return out, nil
}

func (s *store) readNotes(ctx context.Context, q string, args []any, seen map[string][]noteSeen) error {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var kh []byte
		var own sql.NullString
		var seq uint64
		if err := rows.Scan(&kh, &own, &seq); err != nil {
			return err
		}
		if own.Valid {
			seen[string(kh)] = append(seen[string(kh)], noteSeen{own: own.String, seq: seq})
		}
	}
	return rows.Err()
}

// EndObserve implements lockmgr.Observer: deletes owner's notes on keys,
// and the notes on them that have ended, in one statement.
func (l *Locker) EndObserve(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return err
	}
	s := l.st
	args := []any{owner.ID()}
	for _, k := range keys {
		args = append(args, keyHash(k.Name))
	}
	q := "DELETE FROM " + s.tn.quoted("_observe") + " WHERE (own = ? OR expires_at < NOW(6)) AND kh IN " + placeholders(len(keys))
	_, err = s.db.ExecContext(ctx, q, args...)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erNoSuchTable {
		return nil // nothing was ever noted
	}
	if err != nil {
		return s.wrap("end observe", err)
	}
	return nil
}
