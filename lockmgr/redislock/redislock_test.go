package redislock_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// testTTL is short so that expiry and renewal tests run in seconds, and
// long enough that renewals keep up on a loaded machine under -race.
const testTTL = 3 * time.Second

// restartTTL outlasts a Redis restart, so a lease from before it is still
// valid after it.
const restartTTL = 8 * time.Second

// prefix keeps this run's keys apart from other users of a shared bed.
func prefix(t testing.TB) string { return servertest.Unique("lptest-") }

// newClient is a client as lockproxy makes one: its timeouts no shorter
// than the longest deadline a caller gives (here the lease), so a Redis
// slowed by a busy machine is waited for, not taken for down.
func newClient(t testing.TB, addr string) redis.UniversalClient {
	o := redislock.ClientOptions([]string{addr}, "", false)
	redislock.BoundByCallers(o, testTTL)
	rdb := redis.NewUniversalClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newLockers makes n Lockers, each with its own client, as n proxy
// instances sharing one Redis.
func newLockers(t *testing.T, addr, pfx string, n int) []lockmgr.Locker {
	return newLockersWith(t, addr, pfx, n, redislock.Options{TTL: testTTL})
}

// newLockersWith is newLockers with options (Prefix and Logger are set).
func newLockersWith(t *testing.T, addr, pfx string, n int, opt redislock.Options) []lockmgr.Locker {
	out := make([]lockmgr.Locker, n)
	for i := range out {
		o := opt
		o.Prefix, o.Logger = pfx, zaptest.NewLogger(t)
		out[i] = redislock.New(newClient(t, addr), &o)
	}
	return out
}

// conformance is the backend suite's view of Lockers built with
// localHandoffs (Options.LocalHandoffs) on the bed's Redis, and on a
// private one for the restart test.
func conformance(t *testing.T, localHandoffs int) locktest.Backend {
	return conformanceWith(t, redislock.Options{LocalHandoffs: localHandoffs})
}

// conformanceWith is conformance with more options (TTL is set).
func conformanceWith(t *testing.T, opt redislock.Options) locktest.Backend {
	bed := testbed.Get(t)
	pfx := prefix(t)
	localHandoffs := opt.LocalHandoffs
	opt.TTL = testTTL
	return locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker {
			return newLockersWith(t, bed.RedisAddr, pfx, n, opt)
		},
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*redislock.Locker).Abandon() },
		Restartable: func(t *testing.T) ([]lockmgr.Locker, time.Duration, func()) {
			own := testbed.Private(t)
			o := opt
			o.TTL = restartTTL
			ls := newLockersWith(t, own.RedisAddr, pfx, 2, o)
			return ls, restartTTL, func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := own.RestartRedis(ctx); err != nil {
					t.Fatalf("restart redis: %v", err)
				}
			}
		},
		Handoffs: localHandoffs > 0,
	}
}

func TestConformance(t *testing.T) {
	locktest.Run(t, conformance(t, 0))
}

// TestConformanceReleaseWindow: the suite with releases held for a ride
// (Options.ReleaseWindow), next to local hand-offs.
func TestConformanceReleaseWindow(t *testing.T) {
	locktest.Run(t, conformanceWith(t, redislock.Options{ReleaseWindow: 5 * time.Millisecond, LocalHandoffs: 3}))
}

// roundTrips counts commands and pipelines sent: one round trip each.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRoundTrips: an uncontended acquire plus release costs at most two
// round trips once the Locker is warm, of one key or of several (a
// statement's IN list): one to acquire, one to release.
func TestRoundTrips(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	l := redislock.New(rdb, &redislock.Options{TTL: 3 * time.Second, Prefix: prefix(t)})
	defer l.Close()
	owner := lockmgr.Owner{Instance: "rt", Session: 1, Start: time.Now()}
	once := func(names ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var keys []lockmgr.Key
		for _, n := range names {
			keys = append(keys, lockmgr.Key{Name: n, Rule: "r"})
		}
		lease, err := l.Acquire(ctx, owner, keys)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	once("warm-up")
	// New loads the scripts and subscribes in the background: let that
	// finish (no round trip for 100 ms) before counting.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n := rt.n.Load()
		time.Sleep(100 * time.Millisecond)
		if rt.n.Load() == n {
			break
		}
	}
	for _, keys := range [][]string{{"counted"}, {"in-1", "in-2", "in-3"}} {
		before := rt.n.Load()
		once(keys...)
		got := rt.n.Load() - before
		t.Logf("uncontended acquire+release of %d key(s): %d round trips", len(keys), got)
		if got > 2 {
			t.Errorf("uncontended acquire+release of %v took %d round trips; want ≤ 2", keys, got)
		}
	}
}
