package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
)

// TestOrphanGrantGivenBack: when a release grants the key to a ticket of
// a Locker whose waiter is gone (a ticket queued on behalf of a next local
// waiter that has left since, or one a failed wait's cleanup raced with),
// that Locker gives the grant back at once, so the next waiter gets the key
// instead of waiting out the grant's lease. The grant lease here (four
// wait slices) is far longer than the waiter's whole wait.
func TestOrphanGrantGivenBack(t *testing.T) {
	bed := testbed.Get(t)
	pfx := servertest.Unique("lptest-")
	mk := func() *Locker {
		rdb := redis.NewUniversalClient(ClientOptions([]string{bed.RedisAddr}, "", false))
		t.Cleanup(func() { _ = rdb.Close() })
		l := New(rdb, &Options{TTL: time.Minute, Prefix: pfx, WaitSlice: 15 * time.Second,
			RestartGrace: -1, Logger: zaptest.NewLogger(t)})
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	here, there := mk(), mk()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := lockmgr.Key{Name: "orphan", Rule: "r"}
	start := time.Now()
	holder := lockmgr.Owner{Instance: "there", Session: 1, Txn: 1, Start: start}
	lease, err := there.Acquire(ctx, holder, []lockmgr.Key{key})
	if err != nil {
		t.Fatal(err)
	}

	// A ticket of here's, queued with a grants entry as its waiters'
	// are, that no waiter here will take.
	gone := lockmgr.Owner{Instance: "here", Session: 2, Txn: 1, Start: start.Add(time.Millisecond)}
	tok, n := here.token(gone), here.names(key.Name)
	if err := here.notify.subscribe(ctx, n.channel, key.Name); err != nil {
		t.Fatal(err)
	}
	v, err := here.sc.acquire.Run(ctx, here.rdb, n.keys(), tok, gone.ID(), gone.Priority(),
		here.opt.TTL.Milliseconds(), here.ticketTTL().Milliseconds(), here.woundChannel(), "1",
		here.opt.FenceTTL.Milliseconds(), "", 0, "", "1").Slice()
	if r, err2 := parseTry(v); err != nil || err2 != nil || r.status != 0 {
		t.Fatalf("queueing the ticket: %v %v %+v; want it queued behind the holder", err, err2, r)
	}

	// A younger waiter elsewhere queues behind it.
	waiter := lockmgr.Owner{Instance: "there", Session: 3, Txn: 1, Start: start.Add(2 * time.Millisecond)}
	got := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, here.grantLease()/3)
		defer wcancel()
		l, err := there.Acquire(wctx, waiter, []lockmgr.Key{key})
		if err == nil {
			defer func() { _ = l.Release(context.Background()) }()
			if own, _ := there.rdb.HGet(ctx, n.lock, "own").Result(); own != waiter.ID() {
				err = &ownerError{own}
			}
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, _ := here.rdb.ZCard(ctx, n.queue).Result(); c == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v; want the key once the grant nobody waits for was given back", err)
	}
}

type ownerError struct{ own string }

func (e *ownerError) Error() string { return "key held by " + e.own + " in Redis" }
