package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestFreeKeyWithWaiters: a key nobody holds but an older waiter is
// queued for (a release woke the waiters rather than granting one of them)
// is not taken by a newcomer: for a key whose rule fences writes the
// uncontended path of the acquire script must see the queue; for one
// whose rule does not, the fast path's SET NX must find the reservation
// such a release leaves (a lock hash without holder). Once the waiter's
// ticket has left the queue the newcomer gets the key, with a fence above
// the counter's.
func TestFreeKeyWithWaiters(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "plain"}[fenced], func(t *testing.T) {
			pfx := prefix(t)
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
			if !fenced {
				if err := rdb.HSet(ctx, base, "r", "1").Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.PExpire(ctx, base, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			const counter = uint64(4e15) // above server time in µs (until 2096), exact in Lua's doubles
			if err := rdb.Set(ctx, base+":fence", counter, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			k := []lockmgr.Key{{Name: "free", Rule: "r", NoHandoff: fenced}}
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			lease, err := ls[0].Acquire(wctx, locktest.Owner("newcomer"), k)
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
			lease, err = ls[0].Acquire(ctx, locktest.Owner("newcomer"), k)
			if err != nil {
				t.Fatalf("newcomer once the queue is gone: %v", err)
			}
			defer func() { _ = lease.Release(ctx) }()
			if f := lease.Fence("free"); f <= counter {
				t.Errorf("fence %d; want above the counter %d", f, counter)
			}
		})
	}
}

// lockOwner is the owner id of the holder of the lock key name, whether
// it is the hash of the scripts or a fast-path holder's string.
func lockOwner(ctx context.Context, rdb redis.UniversalClient, name string) (string, error) {
	typ, err := rdb.Type(ctx, name).Result()
	if err != nil || typ != "string" {
		return rdb.HGet(ctx, name, "own").Result()
	}
	v, err := rdb.Get(ctx, name).Result()
	if err != nil {
		return "", err
	}
	// #tok ':' tok #own ':' own prio ':' fence ':' channel
	field := func() string {
		i := strings.IndexByte(v, ':')
		n, _ := strconv.Atoi(v[:i])
		f := v[i+1 : i+1+n]
		v = v[i+1+n:]
		return f
	}
	field()
	return field(), nil
}

// takeOver gives the lock key name to another holder behind its
// Locker's back, whatever its form, keeping its expiry.
func takeOver(ctx context.Context, rdb redis.UniversalClient, name string) error {
	if typ, err := rdb.Type(ctx, name).Result(); err != nil || typ != "string" {
		return rdb.HSet(ctx, name, "tok", "someone else").Err()
	}
	return rdb.SetArgs(ctx, name, "12:someone else0:0:0:", redis.SetArgs{KeepTTL: true}).Err()
}

// TestFastPathSwitch: a key whose rule does not fence writes is taken by
// one SET NX when nobody holds it (the lock is then a string) and turned
// into the scripts' hash when anyone else asks for it, with everything
// the queue, wound-wait and grants need: the holder's owner and age (an
// older contender wounds it), its token (its release and renewals still
// find it ours) and its fence (grants after it have higher ones). Once
// nobody waits, the key is free for the fast path again; a fast holder
// that vanishes leaves the key to its waiter when its lease runs out.
func TestFastPathSwitch(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	pfx := prefix(t)
	ls := newLockers(t, bed.RedisAddr, pfx, 3)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := lockmgr.Key{Name: "switch", Rule: "r"}
	lock := pfx + ":{switch}"
	typ := func() string { return rdb.Type(ctx, lock).Val() }

	older := locktest.Owner("older") // older than every owner made below
	young := locktest.Owner("young")
	holder, err := ls[0].Acquire(ctx, young, []lockmgr.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	if got := typ(); got != "string" {
		t.Fatalf("uncontended lock is a %s; want the fast path's string", got)
	}
	if own, err := lockOwner(ctx, rdb, lock); err != nil || own != young.ID() {
		t.Fatalf("fast holder recorded as %q (%v); want %q", own, err, young.ID())
	}
	// An older contender on another Locker: the lock becomes a hash
	// under the same holder, and the holder is wounded.
	got := make(chan *lockmgr.Lease, 1)
	go func() {
		l, err := ls[1].Acquire(ctx, older, []lockmgr.Key{k})
		if err != nil {
			t.Errorf("older contender: %v", err)
		}
		got <- l
	}()
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return typ() == "hash" })
	if own := rdb.HGet(ctx, lock, "own").Val(); own != young.ID() {
		t.Fatalf("promoted lock's owner %q; want the fast holder %q", own, young.ID())
	}
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return rdb.HGet(ctx, lock, "wounded").Val() == "1" })
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("fast holder's release after promotion: %v", err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	if next.Fence(k.Name) <= holder.Fence(k.Name) {
		t.Errorf("fence %d after the fast holder's %d; want growing", next.Fence(k.Name), holder.Fence(k.Name))
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody waits any more: the next grant is the fast path's again.
	again, err := ls[2].Acquire(ctx, locktest.Owner("again"), []lockmgr.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	if got := typ(); got != "string" {
		t.Errorf("lock after contention ended is a %s; want the fast path's string", got)
	}
	if again.Fence(k.Name) <= next.Fence(k.Name) {
		t.Errorf("fence %d after %d; want growing", again.Fence(k.Name), next.Fence(k.Name))
	}
	// The fast holder vanishes with a waiter queued: the waiter gets the
	// key when the lease runs out.
	waiter := make(chan *lockmgr.Lease, 1)
	go func() {
		l, err := ls[1].Acquire(ctx, locktest.Owner("waiter"), []lockmgr.Key{k})
		if err != nil {
			t.Errorf("waiter behind a vanished holder: %v", err)
		}
		waiter <- l
	}()
	testbed.Eventually(t, 10*time.Second, "condition", func() bool { return typ() == "hash" })
	ls[2].(*redislock.Locker).Abandon()
	w := <-waiter
	if w == nil {
		t.FailNow()
	}
	if w.Fence(k.Name) <= again.Fence(k.Name) {
		t.Errorf("fence %d after the vanished holder's %d; want growing", w.Fence(k.Name), again.Fence(k.Name))
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
