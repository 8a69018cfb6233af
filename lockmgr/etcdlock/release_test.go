package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// TestReleaseThroughAnOutage: a release etcd could not answer (it was
// down past the release's deadline, but for less than the session's ttl,
// so the session lives on after it) must not leave the key locked for as
// long as the session lives: once etcd is back, another owner gets the
// key, well within a ttl (its entry was not left to expire).
func TestReleaseThroughAnOutage(t *testing.T) {
	own := servertest.Own(t, "etcdlock-release-", startServer, (*server).stop)
	const ttl = 10 * time.Second
	pfx := prefix()
	mk := func() *etcdlock.Locker {
		return etcdlock.New(own.newClient(t), &etcdlock.Options{TTL: ttl, Prefix: pfx, OpTimeout: 300 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	}
	a, b := mk(), mk()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := []lockmgr.Key{{Name: "outage", Rule: "sku"}}
	lease, err := a.Acquire(ctx, locktest.Owner("first"), key)
	if err != nil {
		t.Fatal(err)
	}
	own.stop()
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	err = lease.Release(rctx)
	rcancel()
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("release with etcd down: %v; want lockmgr.ErrUnavailable", err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, ttl/2)
	defer wcancel()
	begin := time.Now()
	next, err := b.Acquire(wctx, locktest.Owner("second"), key)
	if err != nil {
		t.Fatalf("the key released while etcd was down is still held %v after etcd came back: %v", time.Since(begin), err)
	}
	t.Logf("granted %v after etcd came back", time.Since(begin))
	_ = next.Release(ctx)
}

// TestEndObserveThroughAnOutage: observe mode's note that an EndObserve
// could not delete (etcd down past its deadline, the session living on)
// must not show its owner in the key's way for as long as the session
// lives: once etcd is back, another owner observing the key sees nobody,
// well within a ttl.
func TestEndObserveThroughAnOutage(t *testing.T) {
	own := servertest.Own(t, "etcdlock-observe-", startServer, (*server).stop)
	const ttl = 10 * time.Second
	pfx := prefix()
	mk := func() *etcdlock.Locker {
		return etcdlock.New(own.newClient(t), &etcdlock.Options{TTL: ttl, Prefix: pfx, OpTimeout: 300 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	}
	a, b := mk(), mk()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := []lockmgr.Key{{Name: "observed", Rule: "sku"}}
	first := locktest.Owner("first")
	if _, err := a.Observe(ctx, first, key); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Observe(ctx, locktest.Owner("probe"), key); err != nil || len(got[key[0].Name]) != 1 {
		t.Fatalf("observe beside the first note: %v, %v; want the first owner in the way", got, err)
	}
	if err := b.EndObserve(ctx, locktest.Owner("probe"), key); err != nil {
		t.Fatal(err)
	}
	own.stop()
	ectx, ecancel := context.WithTimeout(ctx, time.Second)
	err := a.EndObserve(ectx, first, key)
	ecancel()
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("end of observation with etcd down: %v; want lockmgr.ErrUnavailable", err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	second := locktest.Owner("second")
	testbed.EventuallyWhy(t, ttl/2, "nobody in the way once etcd is back", func() (bool, string) {
		got, err := b.Observe(ctx, second, key)
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 0, fmt.Sprintf("in the way: %v", got)
	})
	if err := b.EndObserve(ctx, second, key); err != nil {
		t.Fatal(err)
	}
}
