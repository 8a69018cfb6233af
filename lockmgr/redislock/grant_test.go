package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/grantscript"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// acquireCalls counts the acquire scripts a client sent and had answered.
type acquireCalls struct{ n atomic.Int64 }

var acquireSHA = redis.NewScript(grantscript.Source).Hash()

func (c *acquireCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *acquireCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) > 1 && (a[0] == "evalsha" || a[0] == "eval") &&
			(a[1] == acquireSHA || a[1] == grantscript.Source) {
			c.n.Add(1)
		}
		return err
	}
}
func (c *acquireCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// holdOwner holds the acquire scripts a client sends for one owner until
// gate is closed; held counts the scripts it has held.
type holdOwner struct {
	id   string
	gate chan struct{}
	held atomic.Int64
}

func (h *holdOwner) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdOwner) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 9 && (a[0] == "evalsha" || a[0] == "eval") && a[9] == h.id {
			h.held.Add(1)
			<-h.gate
		}
		return next(ctx, cmd)
	}
}
func (h *holdOwner) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// failFirstPipeline fails the first pipeline of scripts a client sends
// (for a Locker that has released nothing yet: its first renewal), before
// it reaches the server.
type failFirstPipeline struct{ failed atomic.Int64 }

func (f *failFirstPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f *failFirstPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f *failFirstPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" && f.failed.CompareAndSwap(0, 1) {
			err := errors.New("injected: pipeline not sent")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// TestReleaseGrants: a release that frees a key another instance waits
// for grants it there, in Redis, to the oldest waiting ticket with a new
// fence and a short lease, and announces it; the waiter takes it from the
// announcement without a round trip of its own, renews the short lease to
// the TTL while it still holds it halfway, and never believes it valid
// longer than Redis keeps it. An announcement that cannot be newer than
// the waiter's last miss (a fence not above the counter and the server
// time that miss saw) is not taken, and a ticket whose Locker does not
// hear announcements is not granted. A grant to a waiter that died with
// its ticket queued holds the key only for that short lease, not for a
// TTL. A failed renewal of the short lease is tried again in time.
func TestReleaseGrants(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	check := newClient(t, bed.RedisAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		ttl       = time.Minute
		waitSlice = 2 * time.Second // a waiter asks again only after this
		grant     = 4 * waitSlice   // the lease a release grants: a ticket's life
	)
	newLocker := func(rdb redis.UniversalClient, reg prometheus.Registerer) *redislock.Locker {
		var m *lockmgr.Metrics
		if reg != nil {
			var err error
			if m, err = lockmgr.NewMetrics(reg); err != nil {
				t.Fatal(err)
			}
		}
		// RestartGrace < 0: the bed's Redis may have started moments ago.
		l := redislock.New(rdb, &redislock.Options{TTL: ttl, WaitSlice: waitSlice, Prefix: pfx,
			Logger: zaptest.NewLogger(t), RestartGrace: -1, Metrics: m})
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	name := func(key, suffix string) string { return pfx + ":{" + key + "}" + suffix }
	// queued waits until n tickets are queued for key in Redis.
	queued := func(key string, n int64) {
		t.Helper()
		testbed.Eventually(t, 10*time.Second, "condition", func() bool { return check.ZCard(ctx, name(key, ":q")).Val() == n })
	}
	// queuedOnce checks that key's queue holds one ticket of owner o, with
	// o's own age: queued by a release on o's behalf (when says when).
	queuedOnce := func(t *testing.T, key string, o lockmgr.Owner, when string) {
		t.Helper()
		var mine []string
		for _, tk := range check.ZRange(ctx, name(key, ":q"), 0, -1).Val() {
			if own, _, _ := strings.Cut(tk, "\x00"); own == o.ID() {
				mine = append(mine, tk)
			}
		}
		if len(mine) != 1 {
			t.Errorf("%s, the queue holds %d tickets of %s; want 1, queued by the release", when, len(mine), o.Instance)
		} else if score := check.ZScore(ctx, name(key, ":q"), mine[0]).Val(); int64(score) != o.Start.UnixMicro() {
			t.Errorf("%s's ticket has priority %v; want its own age %d", o.Instance, score, o.Start.UnixMicro())
		}
	}
	acquireAsync := func(l lockmgr.Locker, o lockmgr.Owner, k lockmgr.Key) (chan *lockmgr.Lease, chan error) {
		lc, ec := make(chan *lockmgr.Lease, 1), make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, o, []lockmgr.Key{k})
			if err != nil {
				ec <- err
				return
			}
			lc <- lease
		}()
		return lc, ec
	}
	// await is the lease acquireAsync got; it fails the test on an error.
	await := func(t *testing.T, lc chan *lockmgr.Lease, ec chan error) *lockmgr.Lease {
		t.Helper()
		select {
		case lease := <-lc:
			return lease
		case err := <-ec:
			t.Fatal(err)
			return nil
		}
	}

	t.Run("announced", func(t *testing.T) {
		k := lockmgr.Key{Name: "announced", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		brdb := newClient(t, bed.RedisAddr)
		calls := &acquireCalls{}
		brdb.AddHook(calls)
		reg := prometheus.NewRegistry()
		b := newLocker(brdb, reg)

		oa := locktest.Owner("a")
		first, err := a.Acquire(ctx, oa, []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		lc, ec := acquireAsync(b, locktest.Owner("b"), k) // younger than a: no wound
		queued(k.Name, 1)
		// Its first miss subscribes and asks once more at once; after
		// the second is answered it sleeps for the wait slice.
		testbed.Eventually(t, 10*time.Second, "condition", func() bool { return calls.n.Load() >= 2 })
		before := calls.n.Load()
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lease := await(t, lc, ec)
		defer func() { _ = lease.Release(ctx) }()
		if n := calls.n.Load() - before; n != 0 {
			t.Errorf("waiter ran the acquire script %d times after the release; want 0 (granted by the release)", n)
		}
		if got := testutil.ToFloat64(mustCounter(t, reg, "lockproxy_lock_release_grants_total")); got != 1 {
			t.Errorf("lockproxy_lock_release_grants_total = %v; want 1", got)
		}
		h := check.HGetAll(ctx, name(k.Name, "")).Val()
		f, _ := strconv.ParseUint(h["f"], 10, 64)
		if got := lease.Fence(k.Name); got != f || got <= first.Fence(k.Name) {
			t.Errorf("fence %d, Redis says %d, the previous holder had %d; want Redis's, above the previous", got, f, first.Fence(k.Name))
		}
		if h["own"] != locktest.Owner("b").ID() || !strings.HasPrefix(h["ch"], pfx+":locker:") {
			t.Errorf("Redis names owner %q with wound channel %q; want %q and b's Locker channel", h["own"], h["ch"], locktest.Owner("b").ID())
		}
		// The short lease is renewed to the TTL, and the holder's view of
		// its validity never outlasts Redis's. Redis has the new TTL a
		// moment before the renewal's reply reaches the holder, so both
		// are awaited before they are compared.
		testbed.Eventually(t, 10*time.Second, "condition", func() bool {
			return check.PTTL(ctx, name(k.Name, "")).Val() > grant && time.Until(lease.ValidUntil()) > grant
		})
		left := time.Until(lease.ValidUntil())
		if pttl := check.PTTL(ctx, name(k.Name, "")).Val(); left <= grant || left >= pttl {
			t.Errorf("lease valid for %v, Redis keeps it %v; want more than the grant's %v and less than Redis's", left, pttl, grant)
		}
	})

	t.Run("successor-queued", func(t *testing.T) {
		// A release that grants the key to an instance's first waiter
		// queues that instance's next waiter too, with its own age, as the
		// acquire script does when it grants: the next waiter keeps its
		// place ahead of younger waiters elsewhere even before it asks.
		k := lockmgr.Key{Name: "successor", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		ob1, ob2 := locktest.Owner("b1"), locktest.Owner("b2") // b1 older than b2
		hold := &holdOwner{id: ob2.ID(), gate: make(chan struct{})}
		brdb := newClient(t, bed.RedisAddr)
		brdb.AddHook(hold)
		b := newLocker(brdb, nil)
		first, err := a.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		lc1, ec1 := acquireAsync(b, ob1, k)
		queued(k.Name, 1)
		lc2, ec2 := acquireAsync(b, ob2, k)
		// b1 (the head here) records b2 as its next waiter at its next
		// ask; b2 itself never asks (held by the hook).
		testbed.Eventually(t, 10*time.Second, "condition", func() bool {
			return check.HExists(ctx, name(k.Name, ":qg"), ">"+check.ZRange(ctx, name(k.Name, ":q"), 0, 0).Val()[0]).Val()
		})
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l1 := await(t, lc1, ec1)
		queuedOnce(t, k.Name, ob2, "after the release granted b1")
		close(hold.gate)
		if err := l1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l2 := await(t, lc2, ec2)
		_ = l2.Release(ctx)
	})

	t.Run("releaser-head-queued", func(t *testing.T) {
		// A release that frees the key queues the releasing instance's
		// local head waiter too, with its own age, before it picks whom to
		// grant: that waiter, which has not asked yet (its scripts held by
		// the hook), keeps its place ahead of a younger waiter of another
		// instance, which would otherwise be granted the key here.
		k := lockmgr.Key{Name: "releaser-head", Rule: "g"}
		oa, ob := locktest.Owner("a2"), locktest.Owner("b") // a2 older than b
		hold := &holdOwner{id: oa.ID(), gate: make(chan struct{})}
		ardb := newClient(t, bed.RedisAddr)
		ardb.AddHook(hold)
		a := newLocker(ardb, nil)
		b := newLocker(newClient(t, bed.RedisAddr), nil)
		first, err := a.Acquire(ctx, locktest.Owner("h"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		lca, eca := acquireAsync(a, oa, k)
		testbed.Eventually(t, 10*time.Second, "condition", func() bool { return hold.held.Load() > 0 })
		lcb, ecb := acquireAsync(b, ob, k)
		queued(k.Name, 1) // b's ticket: a2's script has not reached Redis
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		queuedOnce(t, k.Name, oa, "after the release")
		select {
		case l := <-lcb:
			_ = l.Release(ctx)
			t.Fatal("b, younger than a2, was granted the key while a2 waited")
		case err := <-ecb:
			t.Fatal(err)
		case <-time.After(500 * time.Millisecond):
		}
		close(hold.gate)
		la := await(t, lca, eca)
		select {
		case <-lcb:
			t.Fatal("b was granted the key while a2 holds it")
		default:
		}
		if err := la.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lb := await(t, lcb, ecb)
		_ = lb.Release(ctx)
	})

	t.Run("renewal-retried", func(t *testing.T) {
		// The first renewal of the short lease fails (its pipeline never
		// reaches Redis); it is tried again before the lease runs out,
		// rather than at the next round, a third of the TTL away.
		k := lockmgr.Key{Name: "retried", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		brdb := newClient(t, bed.RedisAddr)
		fail := &failFirstPipeline{}
		brdb.AddHook(fail)
		b := newLocker(brdb, nil)
		first, err := a.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		lc, ec := acquireAsync(b, locktest.Owner("b"), k)
		queued(k.Name, 1)
		testbed.Eventually(t, 10*time.Second, "condition", func() bool {
			return check.HExists(ctx, name(k.Name, ":qg"), check.ZRange(ctx, name(k.Name, ":q"), 0, 0).Val()[0]).Val()
		})
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lease := await(t, lc, ec)
		defer func() { _ = lease.Release(ctx) }()
		if pttl := check.PTTL(ctx, name(k.Name, "")).Val(); pttl > grant {
			t.Fatalf("granted for %v; want the short lease (at most %v)", pttl, grant)
		}
		testbed.Eventually(t, 10*time.Second, "condition", func() bool { return check.PTTL(ctx, name(k.Name, "")).Val() > grant })
		if fail.failed.Load() != 1 || lease.Err() != nil || !lease.Valid() {
			t.Fatalf("failed renewals %d, lease error %v, valid %v; want one failure and the lease kept", fail.failed.Load(), lease.Err(), lease.Valid())
		}
	})

	t.Run("stale", func(t *testing.T) {
		k := lockmgr.Key{Name: "stale", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		b := newLocker(newClient(t, bed.RedisAddr), nil)
		first, err := a.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		lc, ec := acquireAsync(b, locktest.Owner("b"), k)
		queued(k.Name, 1)
		tok := check.ZRange(ctx, name(k.Name, ":q"), 0, 0).Val()[0]
		// An announcement for b's ticket with a fence above the counter
		// but from before b's last look (as one delayed from an earlier
		// grant, or from a server a failover replaced with a lagging
		// counter, would be): b must not take a lock a still holds.
		counter, err := check.Get(ctx, name(k.Name, ":fence")).Uint64()
		if err != nil {
			t.Fatal(err)
		}
		fake := "g" + strconv.FormatUint(counter+1, 10) + " " + tok
		if err := check.Publish(ctx, name(k.Name, ":wake"), fake).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lc:
			t.Fatal("waiter took a stale announcement while the key was held")
		case err := <-ec:
			t.Fatal(err)
		case <-time.After(waitSlice / 2):
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_ = await(t, lc, ec).Release(ctx)
	})

	t.Run("unheard", func(t *testing.T) {
		// A ticket queued by a Locker that does not hear the key's
		// announcements (not subscribed yet) gets no grants entry, and a
		// release does not grant the key to it: it is woken to ask.
		k := lockmgr.Key{Name: "unheard", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		first, err := a.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		tok := "u/1/1\x00raw:1"
		keys := []string{name(k.Name, ""), name(k.Name, ":q"), name(k.Name, ":qx"), name(k.Name, ":fence"), name(k.Name, ":qg")}
		v, err := check.Eval(ctx, grantscript.Source, keys, tok, "u/1/1", time.Now().UnixMicro(), ttl.Milliseconds(),
			grant.Milliseconds(), "", "1", (24 * time.Hour).Milliseconds(), "", 0, "", "").Slice()
		if err != nil || len(v) < 1 || v[0] != int64(0) {
			t.Fatalf("acquire by hand: %v, %v; want held by a", v, err)
		}
		if check.HExists(ctx, name(k.Name, ":qg"), tok).Val() {
			t.Fatal("a ticket whose Locker does not hear announcements has a grants entry")
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := check.HGet(ctx, name(k.Name, ""), "tok").Val(); got != "" {
			t.Fatalf("after the release Redis names ticket %q; want the key free for the unheard ticket to ask", got)
		}
		check.Del(ctx, keys[1:3]...)
	})

	t.Run("dead-waiter", func(t *testing.T) {
		k := lockmgr.Key{Name: "dead", Rule: "g"}
		a := newLocker(newClient(t, bed.RedisAddr), nil)
		deadRdb := redis.NewUniversalClient(redislock.ClientOptions([]string{bed.RedisAddr}, "", false))
		dead := newLocker(deadRdb, nil)
		c := newLocker(newClient(t, bed.RedisAddr), nil)
		first, err := a.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		_, dec := acquireAsync(dead, locktest.Owner("dead"), k) // older than c: first in line
		queued(k.Name, 1)
		deadTok := check.ZRange(ctx, name(k.Name, ":q"), 0, 0).Val()[0]
		lc, ec := acquireAsync(c, locktest.Owner("c"), k)
		queued(k.Name, 2)
		// The instance dies: its client goes first, so nothing of its
		// wait is cleaned up in Redis.
		_ = deadRdb.Close()
		dead.Abandon()
		// Its wait ends with the Locker closed, or, when the closed client
		// answers the wait's next call before Abandon is seen, with Redis
		// unavailable: either way it got no lease.
		if err := <-dec; !errors.Is(err, lockmgr.ErrClosed) && !errors.Is(err, lockmgr.ErrUnavailable) {
			t.Fatalf("dead waiter: %v; want ErrClosed or ErrUnavailable", err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := check.HGet(ctx, name(k.Name, ""), "tok").Val(); got != deadTok {
			t.Fatalf("after the release Redis names ticket %q; want the dead waiter's, the oldest", got)
		}
		if pttl := check.PTTL(ctx, name(k.Name, "")).Val(); pttl > grant {
			t.Fatalf("the grant to the dead waiter lasts %v; want at most the ticket's life %v", pttl, grant)
		}
		select {
		case lease := <-lc:
			_ = lease.Release(ctx)
		case err := <-ec:
			t.Fatal(err)
		case <-time.After(ttl / 2):
			t.Fatalf("the next waiter did not get the key within %v of a grant to a dead waiter", ttl/2)
		}
	})
}
