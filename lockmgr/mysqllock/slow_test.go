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

// TestSlowTableGrantsWithinTheWait: a lock table whose statements take
// longer than OpTimeout, but answer within the acquire's wait, still
// grants. The slowness is a row lock another transaction holds on the
// key's row: the acquire's statement waits for it in InnoDB (up to
// innodb_lock_wait_timeout, 1 s, five times OpTimeout here), is tried
// again, waits again, and takes the row once the other transaction ends. No statement
// of the acquire is cut by a timeout of the driver's own.
func TestSlowTableGrantsWithinTheWait(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	const op = 200 * time.Millisecond
	l := open(t, bed, dbName, &mysqllock.Options{TTL: testTTL, OpTimeout: op})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []lockmgr.Key{{Name: "slow", Rule: "sku"}}
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	commit := holdLockRows(t, ctx, l, db, key)
	got := acquireBehind(ctx, l, key)
	// Hold the row until the acquire's statements have waited for it past
	// innodb_lock_wait_timeout twice and it is sent a third time: three
	// waiting statements (transaction ids) seen. (A statement cut by a
	// driver timeout of 2 × OpTimeout was tried once more, then the
	// acquire failed as unavailable.) InnoDB refreshes INNODB_TRX only
	// when it was not read for 100 ms, so poll slower than that.
	seen := map[string]bool{}
	for len(seen) < 3 {
		for _, w := range lockWaits(t, ctx, db, dbName) {
			seen[w.trx] = true
		}
		select {
		case err := <-got:
			t.Fatalf("acquire ended (%v) while the lock row was held, after %d waiting statements; want it to wait on, the table being slow, not down", err, len(seen))
		case <-time.After(150 * time.Millisecond):
		}
	}
	commit()
	if err := <-got; err != nil {
		t.Fatalf("acquire once the row was free: %v", err)
	}
}

// TestStatementTimeLimitWaitsOn: a lock server whose DBA set a
// max_statement_time shorter than the lock's row waits cuts a waiting
// statement with 1969, not 1205. That is the server not answering in
// time, not a refusal: the acquire tries again within its own wait and
// takes the key once it is free. The limit is the lock account's own
// (WITH MAX_STATEMENT_TIME), as a DBA sets it.
func TestStatementTimeLimitWaitsOn(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	user := limitedAccount(t, bed, dbName, "MAX_STATEMENT_TIME 0.2")
	l := openAs(t, bed, dbName, user)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := []lockmgr.Key{{Name: "limited", Rule: "sku"}}
	commit := holdLockRows(t, ctx, l, bed.Open(t, bed.PrimaryAddr, dbName), key)
	// The limit is in force for the lock's account: a statement waiting
	// for a row lock ends with 1969.
	cfg := mysqllock.DriverConfig(bed.PrimaryAddr, user, password(user))
	cfg.DBName = dbName
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	limited := sql.OpenDB(conn)
	defer limited.Close()
	var me *mysql.MySQLError
	if _, err := limited.ExecContext(ctx, "UPDATE locks SET kh = kh"); !errors.As(err, &me) || me.Number != 1969 {
		t.Fatalf("a row wait of the limited account ended with %v; want error 1969", err)
	}
	got := acquireBehind(ctx, l, key)
	// Hold the row for ten times the limit.
	select {
	case err := <-got:
		t.Fatalf("acquire ended (%v) while the lock row was held; want it to wait on", err)
	case <-time.After(2 * time.Second):
	}
	commit()
	if err := <-got; err != nil {
		t.Fatalf("acquire once the row was free: %v", err)
	}
}

// limitedAccount makes an account, dropped when the test ends, with all
// privileges on dbName and the resource limit given (a WITH clause of
// CREATE USER), and returns its name; its password is password(name).
func limitedAccount(t *testing.T, bed *testbed.Bed, dbName, limit string) string {
	t.Helper()
	user := testbed.UniqueName(t)
	root := bed.Open(t, bed.PrimaryAddr, "")
	testbed.MustExec(t, root,
		"CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+password(user)+"' WITH "+limit,
		"GRANT ALL ON `"+dbName+"`.* TO '"+user+"'@'%'")
	t.Cleanup(func() { testbed.MustExec(t, root, "DROP USER IF EXISTS '"+user+"'@'%'") })
	return user
}

func password(user string) string { return "pw-" + user }

// openAs opens a Locker on dbName's lock table as user (limitedAccount).
func openAs(t *testing.T, bed *testbed.Bed, dbName, user string) *mysqllock.Locker {
	t.Helper()
	l, err := mysqllock.Open(mysqllock.Config{
		Addr: bed.PrimaryAddr, User: user, Password: password(user), Table: dbName + ".locks",
	}, &mysqllock.Options{TTL: testTTL, OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// holdLockRows takes key's lock once and gives it back, so that its row
// is in the lock table, then holds a row lock on every row of the table
// in a transaction of its own on db until commit is called (or the test
// ends): what a slow lock table looks like to the acquires.
func holdLockRows(t *testing.T, ctx context.Context, l *mysqllock.Locker, db *sql.DB, key []lockmgr.Key) (commit func()) {
	t.Helper()
	lease, err := l.Acquire(ctx, locktest.Owner("first"), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.ExecContext(ctx, "SELECT kh FROM locks FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// acquireBehind runs an acquire of key, with a statement's wait of 15 s,
// on a goroutine of its own; what it ended with (once a granted lease is
// released) comes on the channel.
func acquireBehind(ctx context.Context, l *mysqllock.Locker, key []lockmgr.Key) <-chan error {
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		lease, err := l.Acquire(wctx, locktest.Owner("second"), key)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	return got
}

// lockWait is a statement on the lock table's rows that waits for a row
// lock: its transaction and the id of its connection.
type lockWait struct{ trx, thread string }

// lockWaits are the statements on dbName's tables that wait for a row
// lock now.
func lockWaits(t *testing.T, ctx context.Context, db *sql.DB, dbName string) []lockWait {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT trx_id, trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?", "%`"+dbName+"`%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []lockWait
	for rows.Next() {
		var w lockWait
		if err := rows.Scan(&w.trx, &w.thread); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
