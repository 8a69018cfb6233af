package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// heldRows lists the rows of sku (by key value) that session id holds
// locks on, sorted.
func heldRows(p *testProxy, id uint64) []string {
	var out []string
	for _, l := range p.srv.Locks() {
		if l.Session == id && l.State == "held" {
			out = append(out, l.Key[strings.LastIndexByte(l.Key, '/')+1:])
		}
	}
	sort.Strings(out)
	return out
}

// openSession opens one connection of h (closed when t ends) and returns it
// with its connection id.
func openSession(t *testing.T, h *sql.DB) (*sql.Conn, uint64) {
	t.Helper()
	c, err := h.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var id uint64
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return c, id
}

// wantLocked fails t unless write on w waits for a row lock another
// session holds and gets lockproxy's 1205.
func wantLocked(t *testing.T, w *sql.DB, write, what string) {
	t.Helper()
	_, err := w.Exec(write)
	if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Errorf("%s: %v, want lockproxy's 1205", what, err)
	}
}

// TestRefusedStatementGivesBackLocks: a statement MariaDB refuses before
// any of it ran keeps none of the row locks it alone took (InnoDB keeps
// none either), while the transaction keeps what it held before. Without
// this, a user with no privilege on a guarded table holds other users'
// rows for as long as its transaction stays open.
func TestRefusedStatementGivesBackLocks(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	const plain, plainPw = "lp_nosku", "lp-nosku-pw"
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10), (3, 10)",
		"CREATE TABLE plain (id INT PRIMARY KEY)",
		"CREATE USER IF NOT EXISTS '"+plain+"'@'%' IDENTIFIED BY '"+plainPw+"'",
		"GRANT SELECT ON `"+db+"`.plain TO '"+plain+"'@'%'")
	t.Cleanup(func() { _, _ = direct.Exec("DROP USER IF EXISTS '" + plain + "'@'%'") })
	p := guardedProxyWith(t, db, nil, func(c *rules.Config) {
		c.Users = append(c.Users, rules.User{User: plain, Password: plainPw})
	})
	ctx := context.Background()
	writer := p.db(t, db, "")

	t.Run("no privilege on the guarded table", func(t *testing.T) {
		c, id := openSession(t, openDB(t, fmt.Sprintf("%s:%s@tcp(%s)/%s", plain, plainPw, p.addr, db)))
		mustConnExec(t, c, "BEGIN")
		_, err := c.ExecContext(ctx, "SELECT stock FROM sku WHERE sku_id IN (1, 2, 3)")
		if me := mysqlErr(t, err); me.Number != 1142 {
			t.Fatalf("read without the privilege: %v, want MariaDB's 1142", err)
		}
		if held := heldRows(p, id); len(held) != 0 {
			t.Errorf("after MariaDB refused the read, the session holds rows %v", held)
		}
		// Every other user's write goes through while the transaction
		// stays open.
		if _, err := writer.ExecContext(ctx, "UPDATE sku SET stock = stock + 1 WHERE sku_id IN (1, 2, 3)"); err != nil {
			t.Fatalf("write of the rows the refused read named: %v", err)
		}
	})

	for _, prepared := range []bool{false, true} {
		name := map[bool]string{false: "text", true: "prepared"}[prepared]
		t.Run("refused statement in a transaction holding other rows/"+name, func(t *testing.T) {
			c, id := openSession(t, p.db(t, db, ""))
			mustConnExec(t, c, "BEGIN", "SELECT stock FROM sku WHERE sku_id = 2")
			var err error
			if prepared {
				// An error at execute time: strict mode refuses the
				// value, and the statement is rolled back.
				_, err = c.ExecContext(ctx, "UPDATE sku SET stock = ? WHERE sku_id = ?", "not a number", 1)
			} else {
				_, err = c.ExecContext(ctx, "UPDATE sku SET no_such_column = 1 WHERE sku_id = 1")
			}
			if err == nil {
				t.Fatal("the statement ran")
			}
			if me := mysqlErr(t, err); strings.HasPrefix(me.Message, "lockproxy:") {
				t.Fatalf("want MariaDB's refusal, got %v", me)
			}
			if held := heldRows(p, id); len(held) != 1 || held[0] != "2" {
				t.Errorf("after the refused statement the session holds rows %v, want [2] (held before it)", held)
			}
			wantLocked(t, writer, "UPDATE sku SET stock = stock + 1 WHERE sku_id = 2", "write of the row held before the refused statement")
			mustConnExec(t, c, "ROLLBACK")
		})
	}

	t.Run("a statement that ran keeps its locks", func(t *testing.T) {
		c, id := openSession(t, p.db(t, db, ""))
		mustConnExec(t, c, "BEGIN")
		if _, err := c.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 3"); err != nil {
			t.Fatalf("update: %v", err)
		}
		if held := heldRows(p, id); len(held) != 1 || held[0] != "3" {
			t.Errorf("after the update the session holds rows %v, want [3]", held)
		}
		mustConnExec(t, c, "ROLLBACK")
	})
}

// TestImplicitCommitReleasesLocks: a statement that ends the transaction
// and begins another (a second BEGIN, COMMIT AND CHAIN, ...) gives back
// the ended transaction's locks, though the session stays in a
// transaction; a text that needs rows after its BEGIN keeps them.
func TestImplicitCommitReleasesLocks(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10)")
	p := guardedProxy(t, db, nil)
	ctx := context.Background()
	writer := p.db(t, db, "")
	for _, end := range []string{"BEGIN", "START TRANSACTION", "START TRANSACTION READ WRITE", "COMMIT AND CHAIN", "ROLLBACK AND CHAIN"} {
		t.Run(end, func(t *testing.T) {
			c, id := openSession(t, p.db(t, db, "multiStatements=true"))
			mustConnExec(t, c, "BEGIN", "SELECT stock FROM sku WHERE sku_id = 1")
			if held := heldRows(p, id); len(held) != 1 {
				t.Fatalf("the transaction holds %v, want row 1", held)
			}
			mustConnExec(t, c, end)
			// The ended transaction's locks are given back once its end
			// is answered, in the background (releaseBehind).
			testbed.Eventually(t, 5*time.Second, "the ended transaction's locks given back after "+end, func() bool {
				return len(heldRows(p, id)) == 0
			})
			if _, err := writer.ExecContext(ctx, "UPDATE sku SET stock = stock + 1 WHERE sku_id = 1"); err != nil {
				t.Errorf("write of the ended transaction's row: %v", err)
			}
			// The next transaction's locks are its own, held to its end.
			mustConnExec(t, c, "SELECT stock FROM sku WHERE sku_id = 2")
			wantLocked(t, writer, "UPDATE sku SET stock = stock + 1 WHERE sku_id = 2", "write of the new transaction's row")
			mustConnExec(t, c, "ROLLBACK")
		})
	}
	t.Run("BEGIN and a read in one text", func(t *testing.T) {
		c, id := openSession(t, p.db(t, db, "multiStatements=true"))
		mustConnExec(t, c, "BEGIN", "SELECT stock FROM sku WHERE sku_id = 1")
		rows, err := c.QueryContext(ctx, "BEGIN; SELECT stock FROM sku WHERE sku_id = 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() || rows.NextResultSet() {
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if held := heldRows(p, id); len(held) != 1 || held[0] != "1" {
			t.Errorf("after a text that reads row 1 in its new transaction the session holds %v, want [1]", held)
		}
		wantLocked(t, writer, "UPDATE sku SET stock = stock + 1 WHERE sku_id = 1", "write of the row the new transaction read")
		mustConnExec(t, c, "ROLLBACK")
	})
}
