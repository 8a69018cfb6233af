package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// TestReleaseThroughAnOutage: a release ZooKeeper could not answer (the
// holder's Locker was cut off past the release's deadline, but for less
// than the session timeout, so the session lives on after it) must not
// leave the key locked for as long as the session lives: once the
// network is back, another owner gets the key, well within a ttl (its
// znode was not left to go with the session).
func TestReleaseThroughAnOutage(t *testing.T) {
	s := getServer(t)
	r := root()
	p := newProxy(t, s.addr)
	const ttl = 10 * time.Second
	holder := newLocker(t, p.addr(), r, ttl)
	defer holder.Close()
	other := newLocker(t, s.addr, r, ttl)
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := []lockmgr.Key{{Name: "outage", Rule: "sku"}}
	lease, err := holder.Acquire(ctx, locktest.Owner("first"), key)
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	err = lease.Release(rctx)
	rcancel()
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("release cut off from ZooKeeper: %v; want lockmgr.ErrUnavailable", err)
	}
	p.restore(t)
	wctx, wcancel := context.WithTimeout(ctx, ttl/2)
	defer wcancel()
	begin := time.Now()
	next, err := other.Acquire(wctx, locktest.Owner("second"), key)
	if err != nil {
		t.Fatalf("the key released while ZooKeeper was cut off is still held %v after the network came back: %v", time.Since(begin), err)
	}
	t.Logf("granted %v after the network came back", time.Since(begin))
	_ = next.Release(ctx)
}

// TestEndObserveThroughAnOutage: observe mode's note that an EndObserve
// could not delete (the observer's Locker cut off past its deadline, the
// session living on) must not show its owner in the key's way for as long
// as the session lives: once the network is back, another owner observing
// the key sees nobody, well within a ttl.
func TestEndObserveThroughAnOutage(t *testing.T) {
	s := getServer(t)
	r := root()
	p := newProxy(t, s.addr)
	const ttl = 10 * time.Second
	observer := newLocker(t, p.addr(), r, ttl)
	defer observer.Close()
	other := newLocker(t, s.addr, r, ttl)
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := []lockmgr.Key{{Name: "observed", Rule: "sku"}}
	first := locktest.Owner("first")
	if _, err := observer.Observe(ctx, first, key); err != nil {
		t.Fatal(err)
	}
	if got, err := other.Observe(ctx, locktest.Owner("probe"), key); err != nil || len(got[key[0].Name]) != 1 {
		t.Fatalf("observe beside the first note: %v, %v; want the first owner in the way", got, err)
	}
	if err := other.EndObserve(ctx, locktest.Owner("probe"), key); err != nil {
		t.Fatal(err)
	}
	p.cut()
	ectx, ecancel := context.WithTimeout(ctx, time.Second)
	err := observer.EndObserve(ectx, first, key)
	ecancel()
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("end of observation cut off from ZooKeeper: %v; want lockmgr.ErrUnavailable", err)
	}
	p.restore(t)
	second := locktest.Owner("second")
	testbed.EventuallyWhy(t, ttl/2, "nobody in the way once the network is back", func() (bool, string) {
		got, err := other.Observe(ctx, second, key)
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 0, fmt.Sprintf("in the way: %v", got)
	})
	if err := other.EndObserve(ctx, second, key); err != nil {
		t.Fatal(err)
	}
}
