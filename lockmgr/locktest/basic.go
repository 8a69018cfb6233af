package locktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// testMutualExclusion: 200 goroutines over 2 Lockers contend for 4 keys;
// at most one holder per key at any time, and fences grow per key (with
// hand-offs: never decrease, and grow on the NoHandoff keys).
func testMutualExclusion(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 4)
	if b.Handoffs {
		ks[0].NoHandoff, ks[1].NoHandoff = true, true
	}
	var mu sync.Mutex
	holders := make(map[string]int)
	lastFence := make(map[string]uint64)
	var wg sync.WaitGroup
	for g := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := ks[rand.IntN(len(ks))]
			lease, err := tryAcquire(ls[g%2], newOwner("me"), long, k)
			if err != nil {
				t.Errorf("goroutine %d: %v", g, err)
				return
			}
			mu.Lock()
			holders[k.Name]++
			if n := holders[k.Name]; n != 1 {
				t.Errorf("key %s has %d holders", k.Name, n)
			}
			f := lease.Fence(k.Name)
			if f < lastFence[k.Name] || (f == lastFence[k.Name] && k.NoHandoff == b.Handoffs) {
				t.Errorf("key %s: fence %d after %d; want growing", k.Name, f, lastFence[k.Name])
			}
			lastFence[k.Name] = f
			mu.Unlock()
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			mu.Lock()
			holders[k.Name]--
			mu.Unlock()
			release(t, lease)
		}()
	}
	wg.Wait()
}

// testAllOrNothing: a multi-key request that cannot get one key leaves the
// others free; a granted multi-key lease holds all of them.
func testAllOrNothing(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 3)
	mid := acquire(t, ls[0], newOwner("a"), long, ks[1])
	_, err := tryAcquire(ls[1], newOwner("b"), short, ks[2], ks[0], ks[1])
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("Acquire of a held key: %v; want ErrWaitTimeout", err)
	}
	for _, k := range []lockmgr.Key{ks[0], ks[2]} {
		release(t, acquire(t, ls[0], newOwner("c"), short*5, k))
	}
	release(t, mid)
	all := acquire(t, ls[1], newOwner("d"), long, ks[2], ks[0], ks[1], ks[0])
	if got := len(all.Keys()); got != 3 {
		t.Errorf("lease holds %d keys; want 3 (duplicates removed)", got)
	}
	for _, k := range ks {
		if all.Fence(k.Name) == 0 {
			t.Errorf("no fence for %s", k.Name)
		}
		mustWaitTimeout(t, ls[0], short, k)
	}
	release(t, all)
}

// testReentrant: a Set acquires only keys it does not hold yet and
// releases everything at once.
func testReentrant(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	s := lockmgr.NewSet(ls[0], newOwner("s"))
	if err := s.Acquire(ctx, ks[:1]); err != nil {
		t.Fatal(err)
	}
	f0 := s.Fence(ks[0].Name)
	if err := s.Acquire(ctx, ks); err != nil {
		t.Fatalf("re-acquire with a held key: %v", err)
	}
	if s.Len() != 2 || !s.Holds(ks[0].Name) || !s.Holds(ks[1].Name) {
		t.Fatalf("set holds %d keys; want both", s.Len())
	}
	if s.Fence(ks[0].Name) != f0 {
		t.Errorf("re-acquire changed the fence of a held key")
	}
	if !s.Valid() || s.Err() != nil {
		t.Errorf("set not valid: %v", s.Err())
	}
	mustWaitTimeout(t, ls[1], short, ks[1])
	if s.Begin(newOwner("s2")) {
		t.Errorf("Begin on a non-empty set succeeded")
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 {
		t.Errorf("set not empty after Release")
	}
	release(t, acquire(t, ls[1], newOwner("o"), short*5, ks...))
}

// testReleaseSafe: Release is idempotent, and a released lease cannot
// release the next holder's lock.
func testReleaseSafe(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	a := acquire(t, ls[0], newOwner("a"), long, k)
	release(t, a)
	release(t, a)
	if !errors.Is(a.Err(), lockmgr.ErrReleased) || a.Valid() {
		t.Errorf("released lease: Err %v, Valid %v", a.Err(), a.Valid())
	}
	select {
	case <-a.Done():
	default:
		t.Errorf("Done not closed after Release")
	}
	bl := acquire(t, ls[1], newOwner("b"), long, k)
	release(t, a)
	mustWaitTimeout(t, ls[0], short, k)
	if !bl.Valid() || bl.Err() != nil {
		t.Errorf("holder disturbed by an old lease's release: %v", bl.Err())
	}
	if bl.Fence(k.Name) <= a.Fence(k.Name) {
		t.Errorf("fence %d after %d; want growing", bl.Fence(k.Name), a.Fence(k.Name))
	}
	release(t, bl)
}

// testCancel: a wait cancelled by its context fails with the context's
// error and leaves nothing held or queued.
func testCancel(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 2)
	a := acquire(t, ls[0], newOwner("a"), long, ks[1])
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := ls[1].Acquire(ctx, newOwner("b"), ks)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v; want context.Canceled", err)
	}
	release(t, a)
	for _, l := range ls {
		drained(t, l, "after cancel")
	}
	release(t, acquire(t, ls[0], newOwner("c"), short*5, ks...))
}

// testSnapshot: held and waited keys show up with rule and owner.
func testSnapshot(t *testing.T, b Backend) {
	ls := lockers(t, b, 1)
	k := keys(t, 1)[0]
	o := newOwner("a")
	a := acquire(t, ls[0], o, long, k)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = tryAcquire(ls[0], newOwner("w"), 2*time.Second, k)
	}()
	testbed.Eventually(t, 20*time.Second, "condition", func() bool { return len(ls[0].Snapshot()) == 2 })
	snap := ls[0].Snapshot()
	if snap[0].State != "held" || snap[0].Owner != o.ID() || snap[0].Rule != k.Rule || snap[0].Key != k.Name {
		t.Errorf("snapshot[0] = %+v; want held by %s", snap[0], o)
	}
	if snap[1].State != "waiting" {
		t.Errorf("snapshot[1] = %+v; want waiting", snap[1])
	}
	<-done
	release(t, a)
	drained(t, ls[0], "after release")
}

// drained checks that l's Snapshot lists nothing once what was released
// has reached the lock service: right away, but for entries "releasing"
// (a release the backend holds to send with its next call), which must
// be gone within a few seconds.
func drained(t *testing.T, l lockmgr.Locker, when string) {
	t.Helper()
	var left []lockmgr.Entry
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left = l.Snapshot()
		releasing := true
		for _, e := range left {
			releasing = releasing && e.State == "releasing"
		}
		if len(left) == 0 || !releasing || time.Now().After(deadline) {
			break
		}
	}
	for _, e := range left {
		t.Errorf("left in snapshot %s: %+v", when, e)
	}
}

// testCloseReleases: closing a Locker gives its keys back and ends its
// leases; it then refuses to acquire.
func testCloseReleases(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	a := acquire(t, ls[0], newOwner("a"), long, k)
	if err := ls[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	default:
		t.Errorf("lease still open after Close")
	}
	release(t, acquire(t, ls[1], newOwner("b"), short*5, k))
	if _, err := tryAcquire(ls[0], newOwner("c"), short, k); !errors.Is(err, lockmgr.ErrClosed) {
		t.Errorf("Acquire after Close: %v; want ErrClosed", err)
	}
}
