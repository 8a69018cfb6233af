package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestConformanceHandoff runs the whole backend suite with local
// hand-offs on: mutual exclusion, FIFO, deadlocks, wounds, expiry and
// restarts must hold when a lease passes between owners of one Locker.
func TestConformanceHandoff(t *testing.T) {
	locktest.Run(t, conformance(t, 3))
}

// TestLocalHandoff: a released lease passes to the next waiter of the
// same Locker without a round trip (Redis still names the first owner and
// the fence stays) when that waiter was queued before Redis granted the
// lease, at most LocalHandoffs times in a row and only within
// LocalHandoffWindow of Redis's grant; otherwise the release goes to Redis
// and the next grant comes from there with a new fence. No
// ticket of a waiter that was handed the lease stays in the Redis queue.
// A NoHandoff key always goes through Redis.
func TestLocalHandoff(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	rt := &pipelines{}
	rdb.AddHook(rt)
	pfx := prefix(t)
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A long TTL keeps renewal pipelines out of the count.
	// RestartGrace < 0: the bed's Redis may have started moments ago, and
	// restarts are not what this test is about.
	l := redislock.New(rdb, &redislock.Options{TTL: time.Minute, Prefix: pfx, Logger: zaptest.NewLogger(t), LocalHandoffs: 2, Metrics: m,
		RestartGrace: -1})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := newClient(t, bed.RedisAddr)
	hashOwner := func(key string) string {
		v, err := lockOwner(ctx, check, pfx+":{"+key+"}")
		if err != nil {
			t.Fatalf("owner of %s: %v", key, err)
		}
		return v
	}
	owner := func(i uint64) lockmgr.Owner {
		return lockmgr.Owner{Instance: "ho", Session: i, Txn: 1, Start: time.Now()}
	}

	// run queues owners 1-4 behind owner 0 on key and releases each lease
	// in turn (after before(i) for the release that grants owner i); the
	// grant to owner i must come from a hand-off exactly when local(i).
	// Owner 1 never gets one: the others were not waiting yet when Redis
	// granted owner 0, so owner 0's release goes to Redis.
	run := func(t *testing.T, l *redislock.Locker, key lockmgr.Key, local func(i int) bool, before func(i int)) {
		owners := []lockmgr.Owner{owner(1), owner(2), owner(3), owner(4), owner(5)}
		first, err := l.Acquire(ctx, owners[0], []lockmgr.Key{key})
		if err != nil {
			t.Fatal(err)
		}
		// The others queue behind it, oldest first.
		leases := make([]chan *lockmgr.Lease, len(owners))
		for i := 1; i < len(owners); i++ {
			leases[i] = make(chan *lockmgr.Lease, 1)
			go func(i int) {
				ls, err := l.Acquire(ctx, owners[i], []lockmgr.Key{key})
				if err != nil {
					t.Error(err)
				}
				leases[i] <- ls
			}(i)
			testbed.Eventually(t, 10*time.Second, "condition", func() bool { return len(waitingOn(l, key.Name)) == i })
		}
		prev, grant, granted := first, first, 0
		for i := 1; i < len(owners); i++ {
			before(i)
			trips := rt.n.Load()
			local := local(i)
			// Every other release first tries ReleaseLocal, which hands
			// the lease on exactly when Release would without Redis, and
			// otherwise leaves it held.
			if i%2 == 0 {
				if handed := prev.ReleaseLocal(); handed != local {
					t.Errorf("hand-off %d: ReleaseLocal %v; want %v", i, handed, local)
				} else if !handed && prev.Err() != nil {
					t.Errorf("hand-off %d: a lease ReleaseLocal kept has ended: %v", i, prev.Err())
				}
			}
			if err := prev.Release(ctx); err != nil {
				t.Fatal(err)
			}
			releaseTrips := rt.n.Load() - trips
			next := <-leases[i]
			if next == nil {
				t.FailNow()
			}
			switch {
			case local && releaseTrips != 0:
				t.Errorf("hand-off %d: the release sent %d pipelines to Redis; want 0", i, releaseTrips)
			case local && hashOwner(key.Name) != owners[granted].ID():
				t.Errorf("after hand-off %d Redis names %s; want the owner it granted to, %s", i, hashOwner(key.Name), owners[granted].ID())
			case local && next.Fence(key.Name) != grant.Fence(key.Name):
				t.Errorf("hand-off %d: fence %d; want the grant's %d", i, next.Fence(key.Name), grant.Fence(key.Name))
			case !local && hashOwner(key.Name) != owners[i].ID():
				t.Errorf("grant %d: Redis names %s; want %s (a grant from Redis)", i, hashOwner(key.Name), owners[i].ID())
			case !local && next.Fence(key.Name) <= prev.Fence(key.Name):
				t.Errorf("grant %d from Redis: fence %d not above %d", i, next.Fence(key.Name), prev.Fence(key.Name))
			}
			if next.Owner() != owners[i] {
				t.Errorf("lease %d owned by %s; want %s", i, next.Owner(), owners[i])
			}
			if !local {
				grant, granted = next, i
			}
			prev = next
		}
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, suffix := range []string{"", ":q", ":qx", ":qg"} {
			if n, err := check.Exists(ctx, pfx+":{"+key.Name+"}"+suffix).Result(); err != nil || n != 0 {
				t.Errorf("after the last release %q exists=%d (%v); want gone (no stale ticket, no lock)", suffix, n, err)
			}
		}
	}
	local := func(rule string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "lockproxy_lock_local_handoffs_total" {
				continue
			}
			for _, c := range mf.GetMetric() {
				for _, lp := range c.GetLabel() {
					if lp.GetName() == "rule" && lp.GetValue() == rule {
						return c.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	now := func(int) {}
	t.Run("bounded", func(t *testing.T) {
		run(t, l, lockmgr.Key{Name: "hot", Rule: "r"}, func(i int) bool { return i == 2 || i == 3 }, now)
	})
	t.Run("no-handoff", func(t *testing.T) {
		run(t, l, lockmgr.Key{Name: "fenced", Rule: "f", NoHandoff: true}, func(int) bool { return false }, now)
	})
	// With a window, a release once the window since Redis's grant has
	// passed goes to Redis however few hand-offs came before; the grant
	// from Redis starts a new window.
	const window = 300 * time.Millisecond
	lw := redislock.New(rdb, &redislock.Options{TTL: time.Minute, Prefix: pfx, Logger: zaptest.NewLogger(t), LocalHandoffs: 10,
		LocalHandoffWindow: window, Metrics: m, RestartGrace: -1})
	defer lw.Close()
	t.Run("window", func(t *testing.T) {
		run(t, lw, lockmgr.Key{Name: "windowed", Rule: "w"}, func(i int) bool { return i == 2 || i == 4 }, func(i int) {
			if i == 3 {
				time.Sleep(window + 50*time.Millisecond)
			}
		})
	})
	for rule, want := range map[string]float64{"r": 2, "f": 0, "w": 2} {
		if got := local(rule); got != want {
			t.Errorf("lockproxy_lock_local_handoffs_total{rule=%s} = %v; want %v", rule, got, want)
		}
	}
}

// TestHandoffInheritsAge: the owner a lease is handed to asks Redis with
// the first owner's age when that is older, so a waiter elsewhere that is
// older than it but younger than the age Redis recorded cannot deadlock
// with it: the receiver, asking with the inherited age, wounds instead of
// waiting.
func TestHandoffInheritsAge(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	mk := func(h int) *redislock.Locker {
		return redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{
			TTL: 5 * time.Second, Prefix: pfx, Logger: zaptest.NewLogger(t), LocalHandoffs: h, RestartGrace: -1,
		})
	}
	here, there := mk(4), mk(4)
	defer here.Close()
	defer there.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	a := lockmgr.Owner{Instance: "here", Session: 1, Txn: 1, Start: t0}
	w := lockmgr.Owner{Instance: "there", Session: 2, Txn: 1, Start: t0.Add(time.Millisecond)}
	b := lockmgr.Owner{Instance: "here", Session: 3, Txn: 1, Start: t0.Add(2 * time.Millisecond)}
	k1, k2 := []lockmgr.Key{{Name: "age-1", Rule: "r"}}, []lockmgr.Key{{Name: "age-2", Rule: "r"}}

	// z holds k1 while a and b queue for it, so that Redis's grant to a
	// comes while b waits, and a's release may be handed to b.
	z := lockmgr.Owner{Instance: "here", Session: 4, Txn: 1, Start: t0.Add(-time.Millisecond)}
	lz, err := here.Acquire(ctx, z, k1)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := there.Acquire(ctx, w, k2)
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(o lockmgr.Owner) chan *lockmgr.Lease {
		got := make(chan *lockmgr.Lease, 1)
		go func() {
			l, err := here.Acquire(ctx, o, k1)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		return got
	}
	gotA := acquire(a)
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return len(waitingOn(here, "age-1")) == 1 })
	gotB := acquire(b)
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return len(waitingOn(here, "age-1")) == 2 })
	if err := lz.Release(ctx); err != nil { // through Redis, to a
		t.Fatal(err)
	}
	la := <-gotA
	if la == nil {
		t.FailNow()
	}
	if err := la.Release(ctx); err != nil { // handed to b
		t.Fatal(err)
	}
	lb := <-gotB
	if lb == nil {
		t.FailNow()
	}
	// w (younger than a, older than b) now wants k1 and b wants k2: with
	// b's own age both would wait for the other until their wait timeouts.
	// Asking with a's age, b is older than w and wounds it: w's wait ends
	// in a deadlock error, w gives k2 back, and b gets it.
	var wg sync.WaitGroup
	var errW, errB error
	take := func(l *redislock.Locker, o lockmgr.Owner, k []lockmgr.Key, held *lockmgr.Lease, err *error) {
		defer wg.Done()
		wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
		defer wcancel()
		var got *lockmgr.Lease
		if got, *err = l.Acquire(wctx, o, k); *err == nil {
			_ = got.Release(ctx)
		}
		_ = held.Release(ctx)
	}
	wg.Add(2)
	go take(there, w, k1, lw, &errW)
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return len(waitingOn(there, "age-1")) == 1 })
	go take(here, b, k2, lb, &errB)
	wg.Wait()
	if !errors.Is(errW, lockmgr.ErrDeadlock) {
		t.Errorf("w's wait ended with %v; want a deadlock error (wounded by b, which asks with a's age), not a wait timeout", errW)
	}
	if errB != nil {
		t.Errorf("b, asking with the inherited older age, should have got k2 (w wounded, then released): %v", errB)
	}
}

// pipelines counts pipelines sent: releases (and renewals) go as
// pipelines, acquires as single commands.
type pipelines struct{ n atomic.Int64 }

func (r *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (r *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (r *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

func waitingOn(l lockmgr.Locker, key string) []lockmgr.Entry {
	var out []lockmgr.Entry
	for _, e := range l.Snapshot() {
		if e.Key == key && e.State == "waiting" {
			out = append(out, e)
		}
	}
	return out
}

// TestHandOver: a lease handed over to another owner of the same Locker
// (Lease.HandOver, what a combined batch does for the next one) keeps
// Redis's grant, its first owner there and its fence, ends the old lease
// as released, counts as a local hand-off and as an acquire, and is
// bounded as hand-offs to local waiters are: LocalHandoffs in a row,
// within LocalHandoffWindow of Redis's grant. The last owner's release
// frees the key for another Locker; a key that must get a new fence with
// every grant never passes. At the bounds a key nobody else asked Redis
// for is kept for another turn; one another Locker asked for is not.
func TestHandOver(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	pfx := prefix(t)
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	l := redislock.New(rdb, &redislock.Options{TTL: time.Minute, Prefix: pfx, Logger: zaptest.NewLogger(t), LocalHandoffs: 2, Metrics: m,
		RestartGrace: -1})
	defer l.Close()
	other := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: time.Minute, Prefix: pfx, Logger: zaptest.NewLogger(t), RestartGrace: -1})
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	owner := func(i uint64) lockmgr.Owner {
		return lockmgr.Owner{Instance: "hv", Session: i, Txn: 1, Start: start.Add(time.Duration(i) * time.Microsecond)}
	}
	key := lockmgr.Key{Name: "row", Rule: "r"}
	first, err := l.Acquire(ctx, owner(1), []lockmgr.Key{key})
	if err != nil {
		t.Fatal(err)
	}
	fence := first.Fence(key.Name)
	lease := first
	for i := uint64(2); i <= 3; i++ {
		next, ok := lease.HandOver(owner(i))
		if !ok {
			t.Fatalf("hand-over %d refused", i-1)
		}
		if next.Owner() != owner(i) || next.Fence(key.Name) != fence || !next.Valid() {
			t.Fatalf("handed lease: owner %v fence %d valid %v; want %v, %d, valid", next.Owner(), next.Fence(key.Name), next.Valid(), owner(i), fence)
		}
		if !errors.Is(lease.Err(), lockmgr.ErrReleased) {
			t.Fatalf("the lease handed on is not ended as released: %v", lease.Err())
		}
		if _, again := lease.HandOver(owner(9)); again {
			t.Fatal("an ended lease was handed over again")
		}
		lease = next
	}
	// Meanwhile the key stayed held: another Locker cannot take it. Its
	// ask is on record in Redis from then on.
	askOther := func(o lockmgr.Owner) {
		t.Helper()
		short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancelShort()
		if _, err := other.Acquire(short, o, []lockmgr.Key{key}); !errors.Is(err, lockmgr.ErrWaitTimeout) {
			t.Errorf("another Locker's acquire while handed over: %v, want a wait timeout", err)
		}
	}
	askOther(owner(5))
	if _, ok := lease.HandOver(owner(4)); ok {
		t.Fatal("a third hand-over in a row passed though another Locker had asked for the key; LocalHandoffs is 2")
	}
	if v := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_lock_local_handoffs_total")); v != 2 {
		t.Errorf("local hand-offs counted %v, want 2", v)
	}
	// Each owner a hand-over passed the key to was granted a lock
	// request: the Acquire and the two hand-overs, not the refused one.
	if v := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_lock_acquire_total")); v != 3 {
		t.Errorf("acquires counted %v, want 3 (one Acquire, two hand-overs)", v)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := other.Acquire(ctx, owner(6), []lockmgr.Key{key})
	if err != nil {
		t.Fatalf("after the last owner's release: %v", err)
	}
	if got.Fence(key.Name) <= fence {
		t.Errorf("Redis's next grant has fence %d, not above %d", got.Fence(key.Name), fence)
	}
	_ = got.Release(ctx)

	// The window: once it has passed since Redis's grant, no hand-over.
	w := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: time.Minute, Prefix: pfx, Logger: zaptest.NewLogger(t),
		LocalHandoffs: 8, LocalHandoffWindow: 30 * time.Millisecond, RestartGrace: -1})
	defer w.Close()
	held, err := w.Acquire(ctx, owner(7), []lockmgr.Key{key})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond) // past the window: nothing to wait for
	// Nobody else asked: the key is kept for another turn.
	kept, ok := held.HandOver(owner(8))
	if !ok {
		t.Fatal("not handed over after LocalHandoffWindow though nobody else asked for the key")
	}
	askOther(owner(12))
	time.Sleep(40 * time.Millisecond)
	if _, ok := kept.HandOver(owner(13)); ok {
		t.Error("handed over after LocalHandoffWindow though another Locker had asked for the key")
	}
	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody else asks: after LocalHandoffs in a row Redis extends the
	// key for a new turn (keep.lua) and the hand-overs go on, with the
	// same fence; once another Locker has asked, the turn ends at the
	// bound and the last owner's release lets it in.
	solo := lockmgr.Key{Name: "solo", Rule: "r"}
	lease, err = l.Acquire(ctx, owner(20), []lockmgr.Key{solo})
	if err != nil {
		t.Fatal(err)
	}
	soloFence := lease.Fence(solo.Name)
	for i := uint64(21); i <= 26; i++ {
		next, ok := lease.HandOver(owner(i))
		if !ok {
			t.Fatalf("hand-over %d refused though nobody else asked for the key", i-20)
		}
		if next.Fence(solo.Name) != soloFence || !next.Valid() {
			t.Fatalf("kept lease: fence %d valid %v; want %d, valid", next.Fence(solo.Name), next.Valid(), soloFence)
		}
		lease = next
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := other.Acquire(short, owner(27), []lockmgr.Key{solo}); !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Errorf("another Locker's acquire of a kept key: %v, want a wait timeout", err)
	}
	cancelShort()
	// Six passed, three turns of two: the seventh would start a fourth.
	if _, ok := lease.HandOver(owner(28)); ok {
		t.Fatal("a turn's bound passed though another Locker had asked for the key")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = other.Acquire(ctx, owner(29), []lockmgr.Key{solo})
	if err != nil {
		t.Fatalf("after the kept key's release: %v", err)
	}
	if got.Fence(solo.Name) <= soloFence {
		t.Errorf("Redis's next grant has fence %d, not above %d", got.Fence(solo.Name), soloFence)
	}
	_ = got.Release(ctx)
	// NoHandoff keys never pass.
	fenced := lockmgr.Key{Name: "fenced", Rule: "r", NoHandoff: true}
	fl, err := l.Acquire(ctx, owner(10), []lockmgr.Key{fenced})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fl.HandOver(owner(11)); ok {
		t.Error("a NoHandoff key was handed over")
	}
	_ = fl.Release(ctx)
}
