package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/mysqllock"
)

// TestKilledQueryWaitsOn: a query killer (an operator's KILL QUERY,
// pt-kill's busy-time rule) that cuts a lock statement waiting for a row
// lock ends it with 1317. Nothing of that statement happened; the acquire
// tries again within its own wait and takes the key once it is free.
func TestKilledQueryWaitsOn(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	l := open(t, bed, dbName, &mysqllock.Options{TTL: testTTL, OpTimeout: 5 * time.Second})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []lockmgr.Key{{Name: "killed", Rule: "sku"}}
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	commit := holdLockRows(t, ctx, l, db, key)
	got := acquireBehind(ctx, l, key)
	// Kill three waiting statements, each as it waits.
	killed := map[string]bool{}
	for len(killed) < 3 {
		for _, w := range lockWaits(t, ctx, db, dbName) {
			if !killed[w.trx] {
				killed[w.trx] = true
				testbed.MustExec(t, db, "KILL QUERY "+w.thread)
			}
		}
		select {
		case err := <-got:
			t.Fatalf("acquire ended (%v) while the lock row was held, after %d of its statements were killed; want it to wait on", err, len(killed))
		case <-time.After(150 * time.Millisecond): // INNODB_TRX is refreshed at most every 100 ms
		}
	}
	select {
	case err := <-got:
		t.Fatalf("acquire ended (%v) while the lock row was held; want it to wait on", err)
	case <-time.After(300 * time.Millisecond):
	}
	commit()
	if err := <-got; err != nil {
		t.Fatalf("acquire once the row was free: %v", err)
	}
}

// TestAccountConnectionLimitIsUnavailable: a lock account at its
// MAX_USER_CONNECTIONS cannot open the connection an acquire needs (MariaDB
// answers 1226; max_user_connections set globally gives 1203): the lock
// service cannot serve now, which is lockmgr.ErrUnavailable (a guarded
// statement waits it out within its wait_timeout), not a refusal. Once a
// slot is free the acquire is granted. (The limit is 4, above the
// Locker's own needs: an acquire and the schema poll run at once.)
func TestAccountConnectionLimitIsUnavailable(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	user := limitedAccount(t, bed, dbName, "MAX_USER_CONNECTIONS 4")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Another client of the account takes all its slots.
	connector, err := mysql.NewConnector(mysqllock.DriverConfig(bed.PrimaryAddr, user, password(user)))
	if err != nil {
		t.Fatal(err)
	}
	other := sql.OpenDB(connector)
	defer other.Close()
	var conns []*sql.Conn
	for {
		c, err := other.Conn(ctx)
		if err == nil {
			err = c.PingContext(ctx)
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1226 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if conns = append(conns, c); len(conns) > 4 {
			t.Fatalf("%d connections of an account limited to 4", len(conns))
		}
	}
	l := openAs(t, bed, dbName, user)
	defer l.Close()
	key := []lockmgr.Key{{Name: "limited", Rule: "sku"}}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	lease, err := l.Acquire(wctx, locktest.Owner("first"), key)
	wcancel()
	if err == nil {
		_ = lease.Release(ctx)
		t.Fatal("acquire granted while the lock account had no connection slot")
	}
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("acquire with the lock account at its connection limit: %v; want lockmgr.ErrUnavailable", err)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	_ = other.Close() // the slots are free once the connections are closed
	testbed.EventuallyWhy(t, 10*time.Second, "granted once a slot is free", func() (bool, string) {
		lease, err := l.Acquire(ctx, locktest.Owner("second"), key)
		if err != nil {
			return false, err.Error()
		}
		return lease.Release(ctx) == nil, "release"
	})
}
