package testbed

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DSN returns a go-sql-driver/mysql DSN for addr (normally PrimaryAddr or
// ReplicaAddr, or a proxy's address) and database db (may be empty) with
// the bed's credentials and the given extra params ("parseTime=true&...").
func (b *Bed) DSN(addr, db string, params string) string {
	cfg := mysql.NewConfig()
	cfg.User = b.User
	cfg.Passwd = b.Password
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.DBName = db
	dsn := cfg.FormatDSN()
	params = strings.TrimPrefix(params, "?")
	if params == "" {
		return dsn
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// Open opens a pool on addr and database db, pings it, and closes it when
// t ends. It fails t if the server does not answer.
func (b *Bed) Open(t testing.TB, addr, db string) *sql.DB {
	t.Helper()
	pool, err := sql.Open("mysql", b.DSN(addr, db, ""))
	if err != nil {
		t.Fatalf("testbed: open %s: %v", addr, err)
	}
	t.Cleanup(func() { pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		t.Fatalf("testbed: ping %s: %v", addr, err)
	}
	return pool
}

// TempDatabase creates a database on the primary for t alone, waits until
// the replica has it too, and drops it when t ends. It returns its name.
func (b *Bed) TempDatabase(t testing.TB) string {
	t.Helper()
	name := UniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	if err := b.exec(ctx, b.PrimaryAddr, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
		defer cancel()
		if err := b.exec(ctx, b.PrimaryAddr, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testbed: %v", err)
		}
	})
	if err := b.WaitReplicaCaughtUp(ctx); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return name
}

// UniqueName returns a name for t that no other test or run uses: lower
// case letters, digits and '_', at most 40 bytes, starting with "t_". It
// suits a database name or a Redis key prefix.
func UniqueName(t testing.TB) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	base := sb.String()
	if len(base) > 27 {
		base = base[:27]
	}
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	return "t_" + base + "_" + hex.EncodeToString(rnd[:])
}

// conn opens a one-connection pool on addr with the bed's credentials.
func (b *Bed) conn(addr string) (*sql.DB, error) {
	db, err := sql.Open("mysql", b.DSN(addr, "", ""))
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: %w", addr, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// exec runs one statement on addr.
func (b *Bed) exec(ctx context.Context, addr, query string) error {
	db, err := b.conn(addr)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, query); err != nil {
		return fmt.Errorf("testbed: %s on %s: %w", query, addr, err)
	}
	return nil
}

// Execer is what MustExec runs statements on: a pool, a connection or a
// transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Conn returns one connection of db's pool, closed when t ends: a
// transaction's statements share it, and two of them are a pooled
// client's read and write on different connections.
func Conn(t testing.TB, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MustExec runs each statement on db in order and fails t at the first
// error, naming the statement.
func MustExec(t testing.TB, db Execer, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
