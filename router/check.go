package router

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers the checks tolerate.
const (
	erParseError       = 1064 // SHOW SLAVE STATUS removed (MySQL 8.4+)
	erUnknownSystemVar = 1193 // no @@gtid_slave_pos (not MariaDB)
)

// run checks b now and then every HealthInterval, or at once when poked,
// until ctx ends; then it closes b's monitoring connection and b.done.
func (r *Router) run(ctx context.Context, b *backend) {
	defer close(b.done)
	defer b.closeDB()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-b.kick:
		}
		r.check(ctx, b)
		timer.Reset(r.config().HealthInterval)
	}
}

// check probes b once with a bounded timeout and records the outcome. A
// check cut short because the router is closing records nothing.
func (r *Router) check(ctx context.Context, b *backend) {
	cfg := r.config()
	started := time.Now()
	db, err := b.openDB(cfg.dial())
	var res checkResult
	if err != nil {
		res = checkResult{err: fmt.Errorf("%w: %w", ErrCheckFailed, err)}
	} else {
		cctx, cancel := context.WithTimeout(ctx, cfg.checkTimeout())
		res = b.probe(cctx, db, cfg.MaxLag)
		cancel()
	}
	if ctx.Err() != nil {
		return
	}
	prev, cur := b.apply(res, started, time.Now(), r.metrics)
	r.logChange(b, prev, cur)
}

// probe runs the statements of one check. The GTID position is read before
// the replication status, so a position recorded with a healthy verdict
// was already applied when the verdict was reached.
func (b *backend) probe(ctx context.Context, db *sql.DB, maxLag time.Duration) checkResult {
	variable := "gtid_binlog_pos"
	if b.role == RoleReplica {
		variable = "gtid_slave_pos"
	}
	gtid, err := queryGTID(ctx, db, variable)
	if err != nil {
		return checkResult{err: fmt.Errorf("%w: %w", ErrCheckFailed, err)}
	}
	if b.role != RoleReplica {
		return checkResult{up: true, gtid: gtid}
	}
	st, err := b.replicaStatus(ctx, db)
	if err != nil {
		return checkResult{err: fmt.Errorf("%w: %w", ErrCheckFailed, err)}
	}
	lag, known, err := st.evaluate(maxLag)
	return checkResult{up: true, lag: lag, lagKnown: known, gtid: gtid, err: err}
}

// queryGTID reads a global GTID variable; a server without it (not
// MariaDB) gives "" rather than an error. The query doubles as the ping
// that proves the server answers SQL.
func queryGTID(ctx context.Context, db *sql.DB, variable string) (string, error) {
	var v sql.NullString
	err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+variable).Scan(&v)
	if isMySQLError(err, erUnknownSystemVar) {
		var one int
		return "", db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	return v.String, err
}

// replicaStatus runs SHOW SLAVE STATUS, falling back for good to SHOW
// REPLICA STATUS on a server that no longer parses the former.
func (b *backend) replicaStatus(ctx context.Context, db *sql.DB) (replicaStatus, error) {
	if b.replicaStmt == "" {
		b.replicaStmt = "SHOW SLAVE STATUS"
	}
	st, err := readReplicaStatus(ctx, db, b.replicaStmt)
	if isMySQLError(err, erParseError) && b.replicaStmt == "SHOW SLAVE STATUS" {
		b.replicaStmt = "SHOW REPLICA STATUS"
		st, err = readReplicaStatus(ctx, db, b.replicaStmt)
	}
	return st, err
}

func readReplicaStatus(ctx context.Context, db *sql.DB, stmt string) (replicaStatus, error) {
	rows, err := db.QueryContext(ctx, stmt)
	if err != nil {
		return replicaStatus{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return replicaStatus{}, err
	}
	if !rows.Next() {
		return replicaStatus{}, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return replicaStatus{}, err
	}
	return parseReplicaStatus(cols, vals), rows.Close()
}

func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// openDB returns b's monitoring pool of one connection, reopening it when
// the credentials or timeouts changed. database/sql replaces a broken
// connection on the next use, which is the reconnect.
func (b *backend) openDB(s dialSettings) (*sql.DB, error) {
	if b.db != nil && b.dbFor == s {
		return b.db, nil
	}
	b.closeDB()
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", b.addr
	cfg.User, cfg.Passwd = s.user, s.password
	cfg.Timeout = s.connectTimeout
	cfg.ReadTimeout, cfg.WriteTimeout = s.queryTimeout, s.queryTimeout
	cfg.Logger = &mysql.NopLogger{} // failures are reported through the check result
	if s.tls != nil {
		cfg.TLS = s.tls.Clone()
		if cfg.TLS.ServerName == "" {
			cfg.TLS.ServerName = hostOf(b.addr)
		}
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	b.db, b.dbFor = db, s
	return db, nil
}

func (b *backend) closeDB() {
	if b.db != nil {
		_ = b.db.Close()
		b.db = nil
	}
}

// hostOf is the host of a host:port address.
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
