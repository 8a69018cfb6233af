package e2e

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

func execOn(t *testing.T, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func keyedTable(t *testing.T, bed *testbed.Bed, db string) {
	t.Helper()
	direct := freshDB(t, bed, db)
	for _, s := range []string{saleSchema, "INSERT INTO sku_stock VALUES (1, 10), (2, 10)"} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeadlockAcrossProxies: two transactions on two proxies take keys in
// opposite orders: one of them must be told 1213 promptly instead of both
// sitting out wait_timeout.
func TestDeadlockAcrossProxies(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_deadlock"
	keyedTable(t, bed, dbName)
	locks := redisLocks(bed, "10s", "20s")
	a := start(t, bed, locks, saleRule(dbName))
	b := start(t, bed, locks, saleRule(dbName))
	ca := testbed.Conn(t, open(t, bed, a.addr, dbName, "", 2))
	cb := testbed.Conn(t, open(t, bed, b.addr, dbName, "", 2))
	execOn(t, ca, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
	time.Sleep(10 * time.Millisecond) // a's transaction is the older one
	execOn(t, cb, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 2")

	type outcome struct {
		who string
		err error
		at  time.Duration
	}
	results := make(chan outcome, 2)
	begin := time.Now()
	go func() {
		_, err := ca.ExecContext(context.Background(), "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 2")
		results <- outcome{"a", err, time.Since(begin)}
	}()
	go func() {
		_, err := cb.ExecContext(context.Background(), "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
		results <- outcome{"b", err, time.Since(begin)}
	}()
	var victims, winners int
	for i := 0; i < 2; i++ {
		var o outcome
		select {
		case o = <-results:
		case <-time.After(15 * time.Second):
			t.Fatal("both transactions still waiting: the deadlock was not broken")
		}
		var me *mysql.MySQLError
		switch {
		case o.err == nil:
			winners++
			c := ca
			if o.who == "b" {
				c = cb
			}
			execOn(t, c, "COMMIT")
		case errors.As(o.err, &me) && me.Number == 1213:
			victims++
			if !strings.HasPrefix(me.Message, "lockproxy:") {
				t.Errorf("victim's error is not lockproxy's: %v", me)
			}
			t.Logf("victim %s got 1213 after %v: %s", o.who, o.at.Round(time.Millisecond), me.Message)
		default:
			t.Fatalf("%s: unexpected %v", o.who, o.err)
		}
	}
	if victims != 1 || winners != 1 {
		t.Fatalf("want one victim and one winner, got %d and %d", victims, winners)
	}
}

// TestKilledProxyLockExpires: a proxy killed while its session holds a key:
// the other proxy's session gets the key once the lease ends, without anyone
// releasing it.
func TestKilledProxyLockExpires(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_kill"
	keyedTable(t, bed, dbName)
	const ttl = 2 * time.Second
	locks := redisLocks(bed, ttl.String(), "15s")
	a := start(t, bed, locks, saleRule(dbName))
	b := start(t, bed, locks, saleRule(dbName))
	ca := testbed.Conn(t, open(t, bed, a.addr, dbName, "", 2))
	execOn(t, ca, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
	killed := time.Now()
	a.kill()
	cb := testbed.Conn(t, open(t, bed, b.addr, dbName, "", 2))
	if _, err := cb.ExecContext(context.Background(), "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatalf("the key of a killed proxy never became free: %v", err)
	}
	t.Logf("key free %v after the holder's proxy was killed (ttl %v)", time.Since(killed).Round(time.Millisecond), ttl)
	var stock int
	if err := cb.QueryRowContext(context.Background(), "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	if stock != 9 {
		t.Fatalf("stock = %d: the killed session's uncommitted update must be rolled back (want 9)", stock)
	}
}
