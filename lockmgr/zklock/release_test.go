package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
