package redislock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// TestReleaseWindow: with Options.ReleaseWindow the release of a lease
// nobody else wanted is held: Redis gets it in the pipeline of the
// Locker's next acquire (one round trip for both), or on its own when the
// window is over, or at once when an owner of the same Locker wants its
// key, or at Close. A lease that was waited for is released at once.
func TestReleaseWindow(t *testing.T) {
	bed := testbed.Get(t)
	const window = 3 * time.Second // longer than any step below but the one that waits for it
	pfx := prefix(t)
	rdb := newClient(t, bed.RedisAddr)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	l := redislock.New(rdb, &redislock.Options{TTL: 20 * time.Second, Prefix: pfx, ReleaseWindow: window})
	defer l.Close()
	other := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: 20 * time.Second, Prefix: pfx})
	defer other.Close()
	check := newClient(t, bed.RedisAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inRedis := lockInRedis(t, ctx, check, pfx)
	session := 0
	acquire := func(l *redislock.Locker, key string) *lockmgr.Lease {
		t.Helper()
		session++
		lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "rw", Session: uint64(session), Start: time.Now()},
			[]lockmgr.Key{{Name: key, Rule: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	release := func(lease *lockmgr.Lease) time.Duration {
		t.Helper()
		start := time.Now()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	release(acquire(l, "warm-up"))
	release(acquire(l, "warm-up-2")) // sends warm-up's release with its acquire
	quiet(rt)

	t.Run("rides with the next acquire", func(t *testing.T) {
		before := rt.n.Load()
		release(acquire(l, "a"))
		if !inRedis("a") {
			t.Fatal("a release held for a ride was sent at once")
		}
		if got := releasing(l, "a"); got != 1 {
			t.Errorf("Snapshot lists a as releasing %d times while its release is held; want 1", got)
		}
		b := acquire(l, "b")
		if got := rt.n.Load() - before; got != 2 {
			t.Errorf("acquire a, release a, acquire b: %d round trips; want 2 (the release rides with b's acquire)", got)
		}
		if inRedis("a") {
			t.Error("a is still in Redis after the next acquire carried its release")
		}
		if got := releasing(l, "a"); got != 0 {
			t.Errorf("Snapshot lists a as releasing %d times after Redis has its release; want 0", got)
		}
		release(b)
	})

	t.Run("ReleaseLocal holds it too", func(t *testing.T) {
		lease := acquire(l, "local")
		if !lease.ReleaseLocal() {
			t.Fatal("ReleaseLocal of a lease nobody else wanted = false; want its release held")
		}
		if lease.Err() == nil {
			t.Error("the lease ReleaseLocal held the release of has not ended")
		}
		if !inRedis("local") {
			t.Fatal("a release ReleaseLocal held was sent at once")
		}
		release(acquire(l, "carrier"))
		if inRedis("local") {
			t.Error("local is still in Redis after the next acquire carried its release")
		}
		// carrier's release is held now, for the next subtest.
	})

	t.Run("the window ends the wait", func(t *testing.T) {
		// carrier's release is held from the subtest before; nothing else asks.
		start := time.Now()
		for inRedis("carrier") {
			if time.Since(start) > window+5*time.Second {
				t.Fatal("a held release was never sent")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if waited := time.Since(start); waited < window/2 {
			t.Errorf("carrier was released after %s; want about the window (%s)", waited, window)
		}
	})

	t.Run("a release held after one that rode waits its own window", func(t *testing.T) {
		// d's release is held, then rides with e's acquire: the timer set
		// for d fires with nothing of d left, while e's release, held
		// half a window later, is not due yet. It must be neither sent
		// then nor forgotten.
		release(acquire(l, "d"))
		e := acquire(l, "e")
		if inRedis("d") {
			t.Fatal("d is still in Redis after e's acquire carried its release")
		}
		time.Sleep(window / 2)
		held := time.Now()
		release(e)
		time.Sleep(window*3/4 - time.Since(held)) // past d's window, before e's
		// On a busy machine the check may come late: only one made well
		// before e's window ends can tell an early send.
		if at := time.Since(held); !inRedis("e") && at < window-window/8 {
			t.Errorf("e's release was sent within %s of being held; want it held for the window (%s)", at, window)
		}
		for inRedis("e") {
			if time.Since(held) > window+5*time.Second {
				t.Fatal("a release held after the one the timer was set for was never sent")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("a local owner of the key sends it at once", func(t *testing.T) {
		release(acquire(l, "c"))
		start := time.Now()
		c := acquire(l, "c")
		if took := time.Since(start); took > window/2 {
			t.Errorf("a second owner of the same Locker took c after %s; want it sent at once, not after the window", took)
		}
		release(c)
	})

	t.Run("another instance's waiter has it sent at once", func(t *testing.T) {
		// d's release is held when the other Locker asks: its queued
		// ticket tells l (acquire.lua), which sends the release then.
		release(acquire(l, "d"))
		start := time.Now()
		d := acquire(other, "d")
		if took := time.Since(start); took > window/2 {
			t.Errorf("another Locker took d after %s; want the held release sent when it asked, not after the window (%s)", took, window)
		}
		release(d)
		// A lease another Locker waited for while it was held is
		// released at once: its release is never held.
		e := acquire(l, "e")
		done := make(chan *lockmgr.Lease)
		go func() { done <- acquire(other, "e") }()
		time.Sleep(300 * time.Millisecond)
		release(e)
		start = time.Now()
		e2 := <-done
		if took := time.Since(start); took > window/2 {
			t.Errorf("the waiter of another Locker took e %s after its release; want at once, not after the window (%s)", took, window)
		}
		release(e2)
		// An older owner of another Locker wounds the holder instead
		// (acquire.lua); a held release goes at once for it too.
		release(acquire(l, "w"))
		start = time.Now()
		w, err := other.Acquire(ctx, lockmgr.Owner{Instance: "rw-old", Session: 1, Start: time.Now().Add(-time.Hour)},
			[]lockmgr.Key{{Name: "w", Rule: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > window/2 {
			t.Errorf("an older owner of another Locker took w after %s; want the held release sent when it asked, not after the window (%s)", took, window)
		}
		release(w)
		f := acquire(other, "f")
		waited := make(chan *lockmgr.Lease)
		go func() { waited <- acquire(l, "f") }()
		time.Sleep(300 * time.Millisecond)
		release(f)
		g := <-waited
		release(g)
		if inRedis("f") {
			t.Error("a lease that was waited for had its release held")
		}
	})

	t.Run("Close sends what is held", func(t *testing.T) {
		release(acquire(l, "h"))
		if !inRedis("h") {
			t.Fatal("h's release was not held")
		}
		_ = l.Close()
		if inRedis("h") {
			t.Error("h is still in Redis after Close")
		}
	})
}

// quiet waits (at most 5 s) until no round trip has been counted by rt
// for 100 ms: a new Locker's own calls (its subscription, its first
// connections' checks) are over.
func quiet(rt *roundTrips) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n := rt.n.Load()
		time.Sleep(100 * time.Millisecond)
		if rt.n.Load() == n {
			return
		}
	}
}

// lockInRedis reports, through check, whether key's lock (under prefix
// pfx) exists in Redis.
func lockInRedis(t *testing.T, ctx context.Context, check redis.UniversalClient, pfx string) func(key string) bool {
	return func(key string) bool {
		t.Helper()
		n, err := check.Exists(ctx, pfx+":{"+key+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
}

// releasing counts l's Snapshot entries for key in state releasing.
func releasing(l *redislock.Locker, key string) int {
	n := 0
	for _, e := range l.Snapshot() {
		if e.Key == key && e.State == "releasing" {
			n++
		}
	}
	return n
}

// slowReleases holds every pipeline with a script call (the release;
// the fast path's acquire is a plain SET) for delay while on is set.
type slowReleases struct {
	on    atomic.Bool
	delay time.Duration
}

func (s *slowReleases) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (s *slowReleases) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (s *slowReleases) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if s.on.Load() && (c.Name() == "evalsha" || c.Name() == "eval") {
				time.Sleep(s.delay)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestReleaseWindowAcquireDoesNotWait: a held release that went on its
// own when the window ended, and whose reply is slow to come (a distant
// or busy Redis), does not hold up the Locker's next acquire of another
// key: it is not on any client's path.
func TestReleaseWindowAcquireDoesNotWait(t *testing.T) {
	bed := testbed.Get(t)
	const window, delay = 50 * time.Millisecond, 3 * time.Second
	rdb := newClient(t, bed.RedisAddr)
	slow := &slowReleases{delay: delay}
	rdb.AddHook(slow)
	l := redislock.New(rdb, &redislock.Options{TTL: 20 * time.Second, Prefix: prefix(t), ReleaseWindow: window})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acquire := func(key string, session uint64) *lockmgr.Lease {
		t.Helper()
		lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "nw", Session: session, Start: time.Now()}, []lockmgr.Key{{Name: key, Rule: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	warm := acquire("warm-up", 1)
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	x := acquire("x", 2)
	slow.on.Store(true)
	if err := x.Release(ctx); err != nil { // held
		t.Fatal(err)
	}
	time.Sleep(4 * window) // the window ends: x's release goes alone, and its reply takes delay
	start := time.Now()
	y := acquire("y", 3)
	if took := time.Since(start); took > delay/2 {
		t.Errorf("acquiring y took %s behind x's release on its way; want it not to wait for that release (%s slow)", took, delay)
	}
	slow.on.Store(false)
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseWindowReclaim: with LocalHandoffs, the next owner of the
// Locker that asks for a key whose release is still held (nothing of it
// sent) takes the lease over without Redis: no round trip, the same
// fence, counted as a local hand-off, and its own release is held again.
// The turn is bounded as local hand-offs are: after LocalHandoffs of them
// the held release goes to Redis with the next acquire's SET NX, which
// takes a new grant. Another Locker's acquire of a key whose release was
// taken over waits for the new owner, then gets it.
func TestReleaseWindowReclaim(t *testing.T) {
	bed := testbed.Get(t)
	const window = 10 * time.Second // longer than any step below
	const limit = 3
	pfx := prefix(t)
	rdb := newClient(t, bed.RedisAddr)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	l := redislock.New(rdb, &redislock.Options{TTL: 20 * time.Second, Prefix: pfx, ReleaseWindow: window,
		LocalHandoffs: limit, Metrics: m, RestartGrace: -1})
	defer l.Close()
	other := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: 20 * time.Second, Prefix: pfx, RestartGrace: -1})
	defer other.Close()
	check := newClient(t, bed.RedisAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inRedis := lockInRedis(t, ctx, check, pfx)
	session := 0
	key := lockmgr.Key{Name: "k", Rule: "r"}
	acquire := func(l *redislock.Locker) *lockmgr.Lease {
		t.Helper()
		session++
		lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "rc", Session: uint64(session), Start: time.Now()}, []lockmgr.Key{key})
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	release := func(lease *lockmgr.Lease) {
		t.Helper()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	warm, err := l.Acquire(ctx, lockmgr.Owner{Instance: "rc", Session: 1000, Start: time.Now()}, []lockmgr.Key{{Name: "warm-up", Rule: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	release(warm)
	quiet(rt) // the Locker hears its wound channel from here on
	first := acquire(l)
	fence := first.Fence(key.Name)
	release(first)
	if !inRedis("k") || releasing(l, "k") != 1 {
		t.Fatal("the first release was not held")
	}
	for i := 1; i <= limit; i++ {
		before := rt.n.Load()
		lease := acquire(l)
		if got := rt.n.Load() - before; got != 0 {
			t.Errorf("take-over %d: %d round trips to Redis; want 0", i, got)
		}
		if got := lease.Fence(key.Name); got != fence {
			t.Errorf("take-over %d: fence %d; want the held lease's %d", i, got, fence)
		}
		if got := releasing(l, "k"); got != 0 {
			t.Errorf("take-over %d: Snapshot lists k as releasing %d times while it is held again", i, got)
		}
		release(lease)
		if !inRedis("k") || releasing(l, "k") != 1 {
			t.Fatalf("take-over %d: its own release was not held again", i)
		}
	}
	if v := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_lock_local_handoffs_total")); v != limit {
		t.Errorf("local hand-offs counted %v; want %d", v, limit)
	}
	// The turn is over: the held release rides with a new grant.
	before := rt.n.Load()
	next := acquire(l)
	if got := rt.n.Load() - before; got != 1 {
		t.Errorf("after %d take-overs: %d round trips; want 1 (the held release and a new grant)", limit, got)
	}
	if got := next.Fence(key.Name); got <= fence {
		t.Errorf("after the turn: fence %d; want a new grant's, above %d", got, fence)
	}
	// Another Locker waits for the owner that took the key over.
	release(next)
	taken := acquire(l)
	done := make(chan *lockmgr.Lease)
	go func() { done <- acquire(other) }()
	select {
	case o := <-done:
		t.Fatalf("another Locker got k (fence %d) while an owner of l held it", o.Fence(key.Name))
	case <-time.After(300 * time.Millisecond):
	}
	release(taken)
	select {
	case o := <-done:
		if o.Fence(key.Name) <= next.Fence(key.Name) {
			t.Errorf("the other Locker's grant has fence %d, not above %d", o.Fence(key.Name), next.Fence(key.Name))
		}
		release(o)
	case <-time.After(window / 2):
		t.Fatal("the other Locker did not get k after its holder's release")
	}
}
