package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrBadTable: the configured table name is not a plain identifier.
var ErrBadTable = errors.New("mysqllock: invalid table name")

// identRe is what a database or table name may be: no quoting needed, and
// room for the "_wait" suffix within MySQL's 64 characters.
var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,58}$`)

// tableName is a validated (database, table); database may be empty (the
// connection's default).
type tableName struct{ db, table string }

func parseTable(s, defaultDB string) (tableName, error) {
	db, table, ok := strings.Cut(s, ".")
	if !ok {
		db, table = defaultDB, s
	}
	if !identRe.MatchString(table) || (db != "" && !identRe.MatchString(db)) || (ok && db == "") {
		return tableName{}, fmt.Errorf("%w: %q (want table or database.table, letters, digits, _ and $)", ErrBadTable, s)
	}
	return tableName{db: db, table: table}, nil
}

// quoted is `db`.`name`, name being the table plus suffix.
func (t tableName) quoted(suffix string) string {
	q := "`" + t.table + suffix + "`"
	if t.db != "" {
		q = "`" + t.db + "`." + q
	}
	return q
}

// ddl creates the database (best effort) and both tables if missing.
func (t tableName) ddl() []string {
	var out []string
	if t.db != "" {
		out = append(out, "CREATE DATABASE IF NOT EXISTS `"+t.db+"`")
	}
	return append(out,
		"CREATE TABLE IF NOT EXISTS "+t.quoted("")+` (
  kh BINARY(32) NOT NULL COMMENT 'SHA-256 of lock_key',
  lock_key BLOB NOT NULL,
  owner VARBINARY(1024) NULL COMMENT 'holder token; NULL when free',
  own VARBINARY(1024) NULL COMMENT 'holder owner id',
  prio BIGINT NOT NULL DEFAULT 0 COMMENT 'holder age, µs since the epoch',
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL COMMENT 'database clock',
  wounded TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (kh),
  KEY owner_idx (owner)
) ENGINE=InnoDB COMMENT='lockproxy lock rows: never deleted, so fences only grow'`,
		"CREATE TABLE IF NOT EXISTS "+t.quoted("_wait")+` (
  kh BINARY(32) NOT NULL,
  prio BIGINT NOT NULL,
  tok VARBINARY(1024) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (kh, prio, tok)
) ENGINE=InnoDB COMMENT='lockproxy lock waiters, oldest first'`)
}

// ddlTimeout bounds creating the tables.
const ddlTimeout = 10 * time.Second

// ensure creates the tables once; it is retried on every call until it
// succeeds. Tables that exist are not touched (no DDL, no metadata lock).
// DDL gets ddlTimeout of its own: it is slow on a busy server.
func (s *store) ensure(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready.Load() {
		return nil
	}
	var me *mysql.MySQLError
	_, err := s.db.ExecContext(ctx, s.q.exists)
	switch {
	case err == nil:
		s.ready.Store(true)
		return nil
	case !errors.As(err, &me) || me.Number != erNoSuchTable:
		return s.wrap("check lock table", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ddlTimeout)
	defer cancel()
	for i, q := range s.tn.ddl() {
		_, err := s.db.ExecContext(ctx, q)
		if i == 0 && s.tn.db != "" && errors.As(err, &me) {
			continue // no right to create databases: it may exist anyway
		}
		if err != nil {
			return s.wrap("create lock table", err)
		}
	}
	s.ready.Store(true)
	return nil
}
