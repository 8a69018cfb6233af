package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

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
