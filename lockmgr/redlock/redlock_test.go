package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redlock"
)

// shared are the three servers of this test binary, started by TestMain.
var shared []*server

// quiet drops go-redis's own log lines (dial failures of killed servers).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	dir, err := os.MkdirTemp("", "redlock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = startServers(dir, 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redlock tests:", err)
		if os.Getenv("CI") == "true" {
			os.Exit(1)
		}
		shared = nil // tests that need them skip
	}
	code := m.Run()
	stopServers(shared)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testTTL is short so expiry and renewal tests run in seconds.
const testTTL = 2 * time.Second

func sharedAddrs(t testing.TB) []string {
	t.Helper()
	if shared == nil {
		t.Skip("no redis-server")
	}
	return addrs(shared)
}

var prefixSeq int

func dial(t testing.TB, as []string, pfx string, ttl time.Duration) *redlock.Locker {
	t.Helper()
	o := &redlock.Options{TTL: ttl, Prefix: pfx, OpTimeout: 3 * time.Second}
	if tt, ok := t.(*testing.T); ok {
		o.Logger = zaptest.NewLogger(tt)
	}
	cs := make([]redis.UniversalClient, len(as))
	for i, a := range as {
		// Generous timeouts: the test machine is shared and slow;
		// production keeps ClientOptions' 500ms.
		co := redlock.ClientOptions(a)
		co.DialTimeout, co.PoolTimeout = 3*time.Second, 3*time.Second
		co.ReadTimeout, co.WriteTimeout = 2*time.Second, 2*time.Second
		cs[i] = redis.NewClient(co)
		t.Cleanup(func() { _ = cs[i].Close() })
	}
	l, err := redlock.New(cs, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func prefix() string {
	prefixSeq++
	return fmt.Sprintf("rltest-%d-%d", time.Now().UnixNano(), prefixSeq)
}

func TestConformance(t *testing.T) {
	as := sharedAddrs(t)
	pfx := prefix()
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker {
			out := make([]lockmgr.Locker, n)
			for i := range out {
				out[i] = dial(t, as, pfx, testTTL)
			}
			return out
		},
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*redlock.Locker).Abandon() },
		// One server of three restarts empty: the lock lives on in the
		// majority and renewal writes it back on the restarted one.
		Restartable: func(t *testing.T) ([]lockmgr.Locker, time.Duration, func()) {
			ss := servers(t, 3)
			pfx := prefix()
			ls := []lockmgr.Locker{dial(t, addrs(ss), pfx, restartTTL), dial(t, addrs(ss), pfx, restartTTL)}
			return ls, restartTTL, func() {
				if err := ss[0].kill(); err != nil {
					t.Fatal(err)
				}
				if err := ss[0].start(); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

// restartTTL outlasts a server restart.
const restartTTL = 3 * time.Second

func TestTooFewServers(t *testing.T) {
	for _, n := range []int{0, 1, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			as := make([]string, n)
			for i := range as {
				as[i] = "127.0.0.1:1"
			}
			if _, err := redlock.Dial(as, "", "", nil); !errors.Is(err, redlock.ErrTooFewServers) {
				t.Errorf("Dial with %d servers: %v; want ErrTooFewServers", n, err)
			}
		})
	}
}

// TestServersKilled: with one of three servers killed during a hold the
// lease survives on the majority and nobody else gets the key; with a
// second one killed renewal fails, the lease is reported lost, and the key
// is never granted to anyone else (no majority is left to grant it).
func TestServersKilled(t *testing.T) {
	ss := servers(t, 3)
	pfx := prefix()
	a, b := dial(t, addrs(ss), pfx, testTTL), dial(t, addrs(ss), pfx, testTTL)
	defer a.Close()
	defer b.Close()
	key := []lockmgr.Key{{Name: "sku:1", Rule: "sku"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := a.Acquire(ctx, locktest.Owner("a"), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss[0].kill(); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*testTTL)
	_, err = b.Acquire(wctx, locktest.Owner("b"), key)
	wcancel()
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("Acquire of a key held on the surviving majority: %v; want ErrWaitTimeout", err)
	}
	if !lease.Valid() || lease.Err() != nil {
		t.Fatalf("lease lost with a majority up: %v", lease.Err())
	}

	if err := a.Ping(ctx); err != nil {
		t.Errorf("Ping with two servers of three: %v", err)
	}
	if err := ss[1].kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-ctx.Done():
		t.Fatal("lease still held with one server of three left")
	}
	if !errors.Is(lease.Err(), lockmgr.ErrLeaseLost) || lease.Valid() {
		t.Errorf("after losing the majority: Err %v, Valid %v; want ErrLeaseLost", lease.Err(), lease.Valid())
	}
	wctx, wcancel = context.WithTimeout(ctx, testTTL)
	next, err := b.Acquire(wctx, locktest.Owner("c"), key)
	wcancel()
	if err == nil {
		_ = next.Release(ctx)
		t.Fatal("key granted with one server of three: no majority can grant it")
	}
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Errorf("Acquire with one server of three: %v; want ErrUnavailable", err)
	}
	if err := a.Ping(ctx); !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Errorf("Ping with one server of three: %v; want ErrUnavailable", err)
	}
}
