package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// TestFreeKeyWithWaiters: a key nobody holds but an older waiter is
// queued for (a release woke the waiters rather than granting one of them)
// is not taken by a newcomer: the uncontended path of the acquire script
// must see the queue and leave the key to the head. Once the waiter's
// ticket has left the queue the newcomer gets the key, with a fence above
// the counter's.
func TestFreeKeyWithWaiters(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	rdb := newClient(t, bed.RedisAddr)
	ls := newLockers(t, bed.RedisAddr, pfx, 1)
	defer ls[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := pfx + ":{free}"
	const ticket = "older\x00elsewhere:1"
	far := time.Now().Add(time.Minute).UnixMilli()
	if err := rdb.ZAdd(ctx, base+":q", redis.Z{Score: 1, Member: ticket}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, base+":qx", redis.Z{Score: float64(far), Member: ticket}).Err(); err != nil {
		t.Fatal(err)
	}
	const counter = uint64(4e15) // above server time in µs (until 2096), exact in Lua's doubles
	if err := rdb.Set(ctx, base+":fence", counter, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	k := []lockmgr.Key{{Name: "free", Rule: "r"}}
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	lease, err := ls[0].Acquire(wctx, owner("newcomer"), k)
	wcancel()
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		if lease != nil {
			_ = lease.Release(ctx)
		}
		t.Fatalf("newcomer behind an older queued waiter: %v; want ErrWaitTimeout", err)
	}
	if err := rdb.Del(ctx, base+":q", base+":qx").Err(); err != nil {
		t.Fatal(err)
	}
	lease, err = ls[0].Acquire(ctx, owner("newcomer"), k)
	if err != nil {
		t.Fatalf("newcomer once the queue is gone: %v", err)
	}
	defer func() { _ = lease.Release(ctx) }()
	if f := lease.Fence("free"); f <= counter {
		t.Errorf("fence %d; want above the counter %d", f, counter)
	}
}
