package mysqllock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/mysqllock"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// testTTL is short so that expiry and renewal tests run in seconds, yet
// long enough for renewals on a loaded machine.
const testTTL = 2 * time.Second

// testOp bounds each statement: generous, because the test machine is
// shared and slow; production keeps the 1s default.
const testOp = 3 * time.Second

// tempDB makes a database for t alone on the primary, dropped at the end.
func tempDB(t testing.TB, bed *testbed.Bed) string {
	t.Helper()
	name := testbed.UniqueName(t)
	db := bed.Open(t, bed.PrimaryAddr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Error(err)
		}
	})
	return name
}

func open(t testing.TB, bed *testbed.Bed, dbName string, o *mysqllock.Options) *mysqllock.Locker {
	t.Helper()
	l, err := mysqllock.Open(mysqllock.Config{
		Addr: bed.PrimaryAddr, User: bed.User, Password: bed.Password,
		Table: dbName + ".locks",
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConformance(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker {
			out := make([]lockmgr.Locker, n)
			for i := range out {
				out[i] = open(t, bed, dbName, &mysqllock.Options{TTL: testTTL, OpTimeout: testOp, Logger: zaptest.NewLogger(t)})
			}
			return out
		},
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*mysqllock.Locker).Abandon() },
	})
}

// TestUnavailable: with nothing listening, Acquire fails with
// ErrUnavailable, not a wait timeout.
func TestUnavailable(t *testing.T) {
	addr, err := servertest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := mysqllock.Open(mysqllock.Config{Addr: addr, User: "u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locktest.Unavailable(t, ctx, l, "the database")
	if err := l.Ping(ctx); !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Errorf("Ping with the database down: %v; want ErrUnavailable", err)
	}
}

// TestLeaseLostWhenTakenOver: a row that someone else holds now is
// reported lost by the next renewal.
func TestLeaseLostWhenTakenOver(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	l := open(t, bed, dbName, &mysqllock.Options{TTL: testTTL, OpTimeout: testOp})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{{Name: "stolen", Rule: "sku"}})
	if err != nil {
		t.Fatal(err)
	}
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	if _, err := db.ExecContext(ctx, "UPDATE locks SET owner = 'someone else'"); err != nil {
		t.Fatal(err)
	}
	locktest.WaitLost(t, ctx, lease)
}

// TestLongKeysAndBadTables: keys longer than any index prefix work (they
// are hashed), and table names that are not identifiers are refused.
func TestLongKeysAndBadTables(t *testing.T) {
	for _, bad := range []string{"a`b", "x; DROP TABLE y", "db.", ".t", "a.b.c", "1abc", ""} {
		t.Run("bad "+bad, func(t *testing.T) {
			if _, err := mysqllock.New(nil, bad, nil); !errors.Is(err, mysqllock.ErrBadTable) {
				t.Errorf("New(%q): %v; want ErrBadTable", bad, err)
			}
		})
	}
	bed := testbed.Get(t)
	l := open(t, bed, tempDB(t, bed), nil)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	long := make([]byte, 5000)
	for i := range long {
		long[i] = byte('!' + i%90)
	}
	keys := []lockmgr.Key{{Name: string(long), Rule: "r"}, {Name: string(long[:4999]), Rule: "r"}}
	lease, err := l.Acquire(ctx, locktest.Owner("long"), keys)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Fence(keys[0].Name) == 0 || lease.Fence(keys[1].Name) == 0 {
		t.Errorf("missing fences: %d %d", lease.Fence(keys[0].Name), lease.Fence(keys[1].Name))
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseRepeatedAfterDeadlock: when InnoDB picks a release as a
// deadlock victim it rolls the release back; the release is repeated, so
// it returns no error and the rows are free at once, not when their
// leases run out.
func TestReleaseRepeatedAfterDeadlock(t *testing.T) {
	bed := testbed.Get(t)
	dbName := tempDB(t, bed)
	// A long TTL: no renewal runs while the test holds rows.
	l := open(t, bed, dbName, &mysqllock.Options{TTL: time.Minute, OpTimeout: 20 * time.Second})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{{Name: "k1", Rule: "sku"}, {Name: "k2", Rule: "sku"}})
	if err != nil {
		t.Fatal(err)
	}
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	db.SetMaxOpenConns(4)
	// The release updates the rows in key hash order: low, then high.
	var low, high []byte
	if err := db.QueryRowContext(ctx, "SELECT MIN(kh), MAX(kh) FROM locks").Scan(&low, &high); err != nil {
		t.Fatal(err)
	}
	if low == nil || string(low) == string(high) {
		t.Fatalf("want two lock rows, got %x and %x", low, high)
	}
	// The other transaction is heavier than the release (InnoDB rolls
	// back the lighter one) and holds the row the release takes second.
	if _, err := db.ExecContext(ctx, "CREATE TABLE ballast (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO ballast VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT kh FROM locks WHERE kh = ? FOR UPDATE", high); err != nil {
		t.Fatal(err)
	}
	var early int // the cache now says no release waits
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&early); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- lease.Release(ctx) }()
	// Wait until the release holds the first row and waits for the second.
	// InnoDB refreshes INNODB_TRX only when it was not read for 100 ms:
	// polling faster would read the same stale answer forever.
	for {
		var waiting int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE '%SET owner = NULL%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-released:
			t.Fatalf("release returned (%v) before it waited for the held row", err)
		case <-time.After(150 * time.Millisecond):
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE locks SET wounded = wounded WHERE kh = ?", low); err != nil {
		t.Fatalf("the heavier transaction was chosen as the victim, not the release: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatalf("Release after a deadlock: %v; want it repeated", err)
	}
	var held int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM locks WHERE owner IS NOT NULL").Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d rows still held after the release", held)
	}
}
