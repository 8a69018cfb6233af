package locktest

import (
	"errors"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// testUncontendedThenContended: one key goes from free to contended and
// back, across two Lockers, so a backend with a cheaper path for keys
// nobody waits for (see redislock) takes every turn between its paths:
// taken while free and nobody waits, then waited for by two owners,
// granted to them in age order, given up by a waiter that timed out, and
// free again for an owner that finds nobody waiting. Every grant is
// exclusive and has a higher fence than the one before. It runs for a key
// whose rule fences writes and for one whose rule does not (a backend may
// take the latter by a cheaper path still, see redislock's fast path).
func testUncontendedThenContended(t *testing.T, b Backend) {
	t.Run("Fenced", func(t *testing.T) { uncontendedThenContended(t, b, true) })
	t.Run("Plain", func(t *testing.T) { uncontendedThenContended(t, b, false) })
}

func uncontendedThenContended(t *testing.T, b Backend, fenced bool) {
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	// Fenced: every grant through the lock service, each with a new fence.
	k.NoHandoff = fenced
	var last uint64
	fence := func(step string, lease *lockmgr.Lease) {
		t.Helper()
		f := lease.Fence(k.Name)
		if f < last || (f == last && (fenced || !b.Handoffs)) {
			t.Fatalf("%s: fence %d after %d; want growing", step, f, last)
		}
		last = f
	}
	for i := range 2 { // free, taken, given back: twice, from each Locker
		lease := acquire(t, ls[i], newOwner("free"), long, k)
		fence("uncontended grant", lease)
		release(t, lease)
	}
	holder := acquire(t, ls[0], newOwner("h"), long, k)
	fence("uncontended grant before contention", holder)
	// Two waiters queue, older first, one on each Locker; a third gives
	// up; a fourth finds the key held and times out as well.
	type result struct {
		lease *lockmgr.Lease
		err   error
	}
	got := make([]chan result, 2)
	for i := range got {
		got[i] = make(chan result, 1)
		o := newOwner("w")
		go func() {
			lease, err := tryAcquire(ls[(i+1)%2], o, long, k)
			got[i] <- result{lease, err}
		}()
		testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == i+1 })
	}
	if _, err := tryAcquire(ls[1], newOwner("late"), 100*time.Millisecond, k); !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("a waiter behind two others: %v; want ErrWaitTimeout", err)
	}
	release(t, holder)
	for i := range got {
		r := <-got[i]
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		fence("grant to a waiter", r.lease)
		if i == 0 {
			select {
			case r2 := <-got[1]:
				t.Fatalf("the younger waiter was granted the key (err %v) while the older holds it", r2.err)
			default:
			}
		}
		release(t, r.lease)
	}
	// Nobody waits any more: the key is free for anyone at once, on either
	// Locker, and fences go on growing.
	for i := range 2 {
		lease := acquire(t, ls[i], newOwner("free again"), long, k)
		fence("uncontended grant after contention", lease)
		mustWaitTimeout(t, ls[(i+1)%2], 100*time.Millisecond, k)
		release(t, lease)
	}
}
