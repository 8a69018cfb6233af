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

func owner(name string) lockmgr.Owner {
	return lockmgr.Owner{Instance: name, Session: 1, Txn: 1, Start: time.Now()}
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
	lease, err := l.Acquire(ctx, owner("a"), []lockmgr.Key{{Name: "stolen", Rule: "sku"}})
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
	lease, err := l.Acquire(ctx, owner("long"), keys)
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
