package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// countWaiting counts "waiting" entries over all lockers.
func countWaiting(ls []lockmgr.Locker) int {
	n := 0
	for _, l := range ls {
		for _, e := range l.Snapshot() {
			if e.State == "waiting" {
				n++
			}
		}
	}
	return n
}

// testFIFO: waiters that queued one after another (each an older
// transaction than the next) are granted in that order, across Lockers
// (with hand-offs: on a NoHandoff key, and on any key within one Locker).
func testFIFO(t *testing.T, b Backend) {
	if !b.Handoffs {
		fifo(t, b, false, 2)
		return
	}
	t.Run("AcrossLockers", func(t *testing.T) { fifo(t, b, true, 2) })
	t.Run("WithinLocker", func(t *testing.T) { fifo(t, b, false, 1) })
}

func fifo(t *testing.T, b Backend, noHandoff bool, spread int) {
	const n = 6
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	k.NoHandoff = noHandoff
	holder := acquire(t, ls[0], newOwner("h"), long, k)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		o := newOwner("w")
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := tryAcquire(ls[i%spread], o, long, k)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release(t, lease)
		}()
		testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == i+1 })
	}
	release(t, holder)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("grant order %v; want 0..%d (key %s)", order, n-1, k.Name)
		}
	}
}

// testDeadlock: an older and a younger transaction take two keys in
// opposite orders. The younger must fail with ErrDeadlock (not wait for the
// timeout), after which the older gets both keys.
func testDeadlock(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name              string
		youngerWaitsFirst bool
	}{{"YoungerWaitsFirst", true}, {"OlderWaitsFirst", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ls := lockers(t, b, 2)
			ks := keys(t, 2)
			old, young := newOwner("old"), newOwner("young")
			oldLease := acquire(t, ls[0], old, long, ks[0])
			youngLease := acquire(t, ls[1], young, long, ks[1])
			youngErr := make(chan error, 1)
			oldErr := make(chan error, 1)
			startYoung := func() {
				go func() {
					l, err := tryAcquire(ls[1], young, long, ks[0])
					if err == nil {
						release(t, l)
					}
					release(t, youngLease) // the proxy rolls back and releases
					youngErr <- err
				}()
			}
			startOld := func() {
				go func() {
					l, err := tryAcquire(ls[0], old, long, ks[1])
					if err == nil {
						release(t, l)
					}
					oldErr <- err
				}()
			}
			if tc.youngerWaitsFirst {
				startYoung()
				testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == 1 })
				startOld()
			} else {
				startOld()
				testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == 1 })
				startYoung()
			}
			if err := <-youngErr; !errors.Is(err, lockmgr.ErrDeadlock) {
				t.Errorf("younger transaction: %v; want ErrDeadlock", err)
			}
			if err := <-oldErr; err != nil {
				t.Errorf("older transaction: %v; want the key once the younger gave up", err)
			}
			release(t, oldLease)
		})
	}
}

// testWoundedHolder: a younger holder wounded by an older waiter keeps its
// lease (it may finish), but its next wait fails with ErrDeadlock at once;
// when it releases, the older waiter is granted.
func testWoundedHolder(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 2)
	old, young := newOwner("old"), newOwner("young")
	blocker := acquire(t, ls[0], newOwner("blocker"), long, ks[1])
	yl := acquire(t, ls[1], young, long, ks[0])
	oldErr := make(chan error, 1)
	go func() {
		l, err := tryAcquire(ls[0], old, long, ks[0])
		if err == nil {
			release(t, l)
		}
		oldErr <- err
	}()
	testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == 1 })
	_, err := tryAcquire(ls[1], young, long, ks[1])
	if !errors.Is(err, lockmgr.ErrDeadlock) {
		t.Errorf("wounded owner's next wait: %v; want ErrDeadlock", err)
	}
	if !yl.Valid() {
		t.Errorf("wounded holder's lease is not valid: %v", yl.Err())
	}
	release(t, yl)
	if err := <-oldErr; err != nil {
		t.Errorf("older waiter: %v", err)
	}
	release(t, blocker)
}

// testTraceHolder: a request that waits for a key held through another
// Locker shows that holder and its place (first) in Snapshot, and names
// the holder to the WaitTrace of its context (the audit log's "holders").
func testTraceHolder(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	ho := newOwner("h")
	holder := acquire(t, ls[0], ho, long, k)
	var trace lockmgr.WaitTrace
	ctx, cancel := context.WithTimeout(lockmgr.WithWaitTrace(context.Background(), &trace), long)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		lease, err := ls[1].Acquire(ctx, newOwner("w"), []lockmgr.Key{k})
		if err == nil {
			release(t, lease)
		}
		got <- err
	}()
	testbed.Eventually(t, 20*time.Second, "condition", func() bool { return countWaiting(ls) == 1 })
	// Snapshot shows what the backend saw of the wait (it may learn it a
	// moment after the wait is recorded).
	testbed.Eventually(t, 20*time.Second, "condition", func() bool {
		for _, e := range ls[1].Snapshot() {
			if e.State == "waiting" && e.Holder == ho.ID() && e.Position == 1 {
				return true
			}
		}
		return false
	})
	release(t, holder)
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if hs := trace.Holders(); len(hs) != 1 || hs[0] != ho.ID() {
		t.Fatalf("trace holders = %q, want [%q]", hs, ho.ID())
	}
}

// testTransfers: transactions that each take two keys of a few, one
// Acquire per key in random order (a proxy session locking the rows of a
// transfer statement by statement), on one Locker and spread over two,
// always end: every Acquire is granted or fails with ErrDeadlock (the
// transaction then releases and starts again, younger), never waits out
// its whole wait, and no key ever has two holders. With hand-offs, the
// owners that inherit an older age must still be wounded and wound as
// that age says, or two of them wait for each other for good.
func testTransfers(t *testing.T, b Backend) {
	for _, spread := range []int{1, 2} {
		t.Run(fmt.Sprintf("Lockers%d", spread), func(t *testing.T) {
			ls := lockers(t, b, spread)
			ks := keys(t, 4)
			var mu sync.Mutex
			holders := make(map[string]int)
			const workers, txns = 6, 25
			var wg sync.WaitGroup
			var done, wounded atomic.Int64
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := ls[w%spread]
					for range txns {
						i := rand.IntN(len(ks))
						j := (i + 1 + rand.IntN(len(ks)-1)) % len(ks)
						set := lockmgr.NewSet(l, newOwner(fmt.Sprint("w", w)))
						var got []string
						var err error
						for _, k := range []lockmgr.Key{ks[i], ks[j]} {
							ctx, cancel := context.WithTimeout(context.Background(), long)
							err = set.Acquire(ctx, []lockmgr.Key{k})
							cancel()
							if err != nil {
								break
							}
							mu.Lock()
							if holders[k.Name]++; holders[k.Name] != 1 {
								t.Errorf("key %s has %d holders", k.Name, holders[k.Name])
							}
							mu.Unlock()
							got = append(got, k.Name)
						}
						switch {
						case err == nil:
							done.Add(1)
							time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
						case errors.Is(err, lockmgr.ErrDeadlock):
							wounded.Add(1)
						default:
							t.Errorf("worker %d: %v; want a grant or ErrDeadlock", w, err)
						}
						mu.Lock()
						for _, k := range got {
							holders[k]--
						}
						mu.Unlock()
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						if err := set.Release(ctx); err != nil {
							t.Errorf("Release: %v", err)
						}
						cancel()
					}
				}()
			}
			wg.Wait()
			t.Logf("%d transactions done, %d wounded and rolled back", done.Load(), wounded.Load())
			if done.Load() == 0 {
				t.Errorf("no transaction got both its keys")
			}
		})
	}
}
