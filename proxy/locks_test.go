package proxy

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// guardedProxy starts a proxy with one rule on db.sku(sku_id) and a memory locker.
func guardedProxy(t *testing.T, db string, edit func(*rules.Rule)) *testProxy {
	t.Helper()
	return guardedProxyWith(t, db, edit, nil)
}

// guardedProxyWith is guardedProxy with the rest of the config edited by
// cfg too.
func guardedProxyWith(t *testing.T, db string, edit func(*rules.Rule), cfg func(*rules.Config)) *testProxy {
	t.Helper()
	return startProxyWith(t, func(c *rules.Config) {
		r := rules.Rule{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(300 * time.Millisecond)}
		if edit != nil {
			edit(&r)
		}
		c.Rules = []rules.Rule{r}
		if cfg != nil {
			cfg(c)
		}
	}, memlock.New(nil, nil))
}

func mysqlErr(t *testing.T, err error) *mysql.MySQLError {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("want a MySQL error, got %v", err)
	}
	return me
}

func TestRowLocks(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10)")
	p := guardedProxy(t, db, nil)
	a, b := p.db(t, db, ""), p.db(t, db, "")
	ctx := context.Background()

	t.Run("held in a transaction until commit", func(t *testing.T) {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
			t.Fatal(err)
		}
		_, err = b.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = '1'")
		me := mysqlErr(t, err)
		if me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("want lockproxy's 1205 naming the rule, got %v", me)
		}
		// Another row is free.
		if _, err := b.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 2"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
			t.Fatalf("after commit: %v", err)
		}
	})
	t.Run("plain read in a transaction takes the lock", func(t *testing.T) {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var stock int
		if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", 1).Scan(&stock); err != nil {
			t.Fatal(err)
		}
		_, err = b.Exec("UPDATE sku SET stock = ? WHERE sku_id = ?", stock-1, 1)
		if me := mysqlErr(t, err); me.Number != 1205 {
			t.Fatalf("prepared update while held: want 1205, got %v", me)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Exec("UPDATE sku SET stock = ? WHERE sku_id = ?", stock-1, 1); err != nil {
			t.Fatalf("after rollback: %v", err)
		}
	})
	t.Run("unkeyed write rejected", func(t *testing.T) {
		_, err := b.Exec("UPDATE sku SET stock = 0")
		me := mysqlErr(t, err)
		if me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("want lockproxy 1105 naming the rule, got %v", me)
		}
		var n int
		if err := base.direct(t, db, "").QueryRow("SELECT COUNT(*) FROM sku WHERE stock = 0").Scan(&n); err != nil || n != 0 {
			t.Fatalf("rejected statement ran: %d rows zeroed, %v", n, err)
		}
	})
	t.Run("released on disconnect", func(t *testing.T) {
		c := p.db(t, db, "")
		conn, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustConnExec(t, conn, "BEGIN", "UPDATE sku SET stock = stock WHERE sku_id = 2")
		_ = conn.Raw(func(any) error { return errDriverBadConn })
		_ = conn.Close()
		_ = c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := b.Exec("UPDATE sku SET stock = stock WHERE sku_id = 2")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lock not released after disconnect: %v", err)
			}
		}
	})
}

var errDriverBadConn = errors.New("close") // any error from Raw discards the connection

func mustConnExec(t *testing.T, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
