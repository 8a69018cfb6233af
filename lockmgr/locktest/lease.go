package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// testVanished: a holder that vanishes without releasing loses the key
// when its lease ends, and the next holder gets a larger fence.
func testVanished(t *testing.T, b Backend) {
	if b.Abandon == nil || b.TTL == 0 {
		t.Skip("backend cannot simulate a vanished holder")
	}
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	gone := acquire(t, ls[0], newOwner("gone"), long, k)
	b.Abandon(ls[0])
	next := acquire(t, ls[1], newOwner("next"), 10*b.TTL+long, k)
	if next.Fence(k.Name) <= gone.Fence(k.Name) {
		t.Errorf("fence %d after %d; want growing", next.Fence(k.Name), gone.Fence(k.Name))
	}
	release(t, next)
}

// testRenewal: a holder that keeps its lease for several TTLs stays valid
// and nobody else gets in meanwhile.
func testRenewal(t *testing.T, b Backend) {
	if b.TTL == 0 {
		t.Skip("leases of this backend do not expire")
	}
	ls := lockers(t, b, 2)
	k := keys(t, 1)[0]
	a := acquire(t, ls[0], newOwner("a"), long, k)
	_, err := tryAcquire(ls[1], newOwner("b"), 4*b.TTL, k)
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("contender during a renewed hold: %v; want ErrWaitTimeout", err)
	}
	if !a.Valid() || a.Err() != nil {
		t.Fatalf("long holder lost its lease: %v", a.Err())
	}
	if !a.ValidUntil().After(time.Now()) {
		t.Errorf("ValidUntil %v is not in the future", a.ValidUntil())
	}
	release(t, a)
}

// testRestart: the lock service restarts (losing its state) while a lease
// is held. Either the holder survives (nobody else gets in) or another owner
// gets the key only once the first lease is no longer valid and is
// reported lost: never two valid holders.
func testRestart(t *testing.T, b Backend) {
	if b.Restartable == nil {
		t.Skip("backend cannot be restarted")
	}
	ls, ttl, restart := b.Restartable(t)
	t.Cleanup(func() {
		for _, l := range ls {
			_ = l.Close()
		}
	})
	k := keys(t, 1)[0]
	a := acquire(t, ls[0], newOwner("a"), long, k)
	restart()
	// A backend that holds grants back for a ttl after a restart grants
	// within about one ttl if the old lease was lost; 2*ttl covers it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	defer cancel()
	var next *lockmgr.Lease
	var err error
	for {
		next, err = ls[1].Acquire(ctx, newOwner("b"), []lockmgr.Key{k})
		if err == nil || !errors.Is(err, lockmgr.ErrUnavailable) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // the server is still starting
	}
	switch {
	case errors.Is(err, lockmgr.ErrWaitTimeout):
		if !a.Valid() {
			t.Fatalf("nobody got the key, but the holder's lease is not valid either: %v", a.Err())
		}
		t.Logf("the holder survived the restart")
		release(t, a)
		return
	case err != nil:
		t.Fatalf("Acquire after restart: %v", err)
	}
	t.Logf("granted again after the restart; first lease: %v", a.Err())
	if a.Valid() {
		t.Fatalf("double grant: %s granted while the first lease is still valid until %v", k.Name, a.ValidUntil())
	}
	select {
	case <-a.Done():
		if !errors.Is(a.Err(), lockmgr.ErrLeaseLost) {
			t.Errorf("first lease ended with %v; want ErrLeaseLost", a.Err())
		}
	case <-time.After(5 * b.TTL):
		t.Errorf("first lease never reported lost")
	}
	release(t, next)
	release(t, a)
}
