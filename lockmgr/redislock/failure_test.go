package redislock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestUnavailable: with nothing listening, Acquire fails with
// ErrUnavailable (not a wait timeout, not a hang).
func TestUnavailable(t *testing.T) {
	addr, err := servertest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l := redislock.New(newClient(t, addr), nil)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locktest.Unavailable(t, ctx, l, "Redis")
}

// TestLeaseLostWhenTakenOver: a lock that someone else holds now (as after
// an expiry during a long pause) is reported lost by the next renewal: Done
// closes, Err wraps ErrLeaseLost, Valid is false, and the metric counts it.
func TestLeaseLostWhenTakenOver(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rdb := newClient(t, bed.RedisAddr)
	l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx, Metrics: m})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{{Name: "stolen", Rule: "sku"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := takeOver(ctx, rdb, pfx+":{stolen}"); err != nil {
		t.Fatal(err)
	}
	locktest.WaitLost(t, ctx, lease)
	if got := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_lock_lease_lost_total")); got != 1 {
		t.Errorf("lease_lost_total = %v; want 1", got)
	}
}

// mustCounter sums the samples of a metric family.
func mustCounter(t *testing.T, g prometheus.Gatherer, name string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	c.Add(sum)
	return c
}

// TestNothingLeftInRedis: after a timed-out wait and a release, the lock,
// its queue, its ticket expiry and its grants hash are gone from Redis.
func TestNothingLeftInRedis(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	rdb := newClient(t, bed.RedisAddr)
	ls := newLockers(t, bed.RedisAddr, pfx, 2)
	defer ls[0].Close()
	defer ls[1].Close()
	k := []lockmgr.Key{{Name: "left", Rule: "r"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := ls[0].Acquire(ctx, locktest.Owner("a"), k)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = ls[1].Acquire(wctx, locktest.Owner("b"), k)
	wcancel()
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("contender: %v; want ErrWaitTimeout", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{pfx + ":{left}", pfx + ":{left}:q", pfx + ":{left}:qx", pfx + ":{left}:qg"} {
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("%s still exists", key)
		}
	}
	if n := rdb.Exists(ctx, pfx+":{left}:fence").Val(); n != 1 {
		t.Errorf("fence counter missing after release; fences must survive releases")
	}
}

// TestKeyEscaping: keys with hash-tag braces and percent signs are distinct
// locks and do not collide with their escaped spellings.
func TestKeyEscaping(t *testing.T) {
	bed := testbed.Get(t)
	ls := newLockers(t, bed.RedisAddr, prefix(t), 1)
	defer ls[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{"a{b}", "a%7Bb%7D", "}x{", "%", "%25"}
	var leases []*lockmgr.Lease
	for i, n := range names {
		l, err := ls[0].Acquire(ctx, lockmgr.Owner{Instance: "e", Session: uint64(i), Start: time.Now()},
			[]lockmgr.Key{{Name: n, Rule: "r"}})
		if err != nil {
			t.Fatalf("Acquire(%q): %v (collides with another key?)", n, err)
		}
		leases = append(leases, l)
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestMetrics: the acquire counter and held gauge follow what happens.
func TestMetrics(t *testing.T) {
	bed := testbed.Get(t)
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	l := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: testTTL, Prefix: prefix(t), Metrics: m})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, locktest.Owner("m"), []lockmgr.Key{{Name: "k1", Rule: "sku"}, {Name: "k2", Rule: "sku"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_locks_held")); got != 2 {
		t.Errorf("locks_held = %v; want 2", got)
	}
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = l.Acquire(wctx, locktest.Owner("m2"), []lockmgr.Key{{Name: "k1", Rule: "sku"}})
	wcancel()
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("contender: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, metricsGolden(), "lockproxy_lock_acquire_total", "lockproxy_locks_held", "lockproxy_lock_waiters"); err != nil {
		t.Error(err)
	}
}

func metricsGolden() *os.File {
	f, err := os.Open("testdata/metrics.golden")
	if err != nil {
		panic(err)
	}
	return f
}

// TestLostLockRestored: a lock the server forgot (restart, failover) while
// its lease is still valid is restored by the next renewal; the holder
// keeps it and nobody else gets in.
func TestLostLockRestored(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	rdb := newClient(t, bed.RedisAddr)
	ls := newLockers(t, bed.RedisAddr, pfx, 2)
	defer ls[0].Close()
	defer ls[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k := []lockmgr.Key{{Name: "forgotten", Rule: "r"}}
	lease, err := ls[0].Acquire(ctx, locktest.Owner("a"), k)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, pfx+":{forgotten}").Err(); err != nil {
		t.Fatal(err)
	}
	for rdb.Exists(ctx, pfx+":{forgotten}").Val() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("lock never restored")
		case <-lease.Done():
			t.Fatalf("lease lost instead of restored: %v", lease.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if tok := rdb.HGet(ctx, pfx+":{forgotten}", "own").Val(); tok != locktest.Owner("a").ID() {
		t.Errorf("restored lock belongs to %q", tok)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*testTTL)
	_, err = ls[1].Acquire(wctx, locktest.Owner("b"), k)
	wcancel()
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Errorf("contender: %v; want ErrWaitTimeout", err)
	}
	if !lease.Valid() {
		t.Errorf("restored lease not valid: %v", lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
