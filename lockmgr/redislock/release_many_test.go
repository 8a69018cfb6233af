package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// scriptCalls counts the EVALSHA commands sent while on.
type scriptCalls struct {
	on atomic.Bool
	n  atomic.Int64
}

func (s *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.count(cmd)
		return next(ctx, cmd)
	}
}
func (s *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			s.count(c)
		}
		return next(ctx, cmds)
	}
}
func (s *scriptCalls) count(c redis.Cmder) {
	if s.on.Load() && (c.Name() == "evalsha" || c.Name() == "eval") {
		s.n.Add(1)
	}
}

// TestReleaseMany: the release of a lease of several keys is one script
// call (release_many.lua), for keys taken by the fast path (a string) and
// by the acquire script (a hash) alike. It deletes what is the lease's and
// nothing else: a key whose lock another token holds now (the lease
// expired and someone took it) stays that token's. A key another
// Locker's session waits for is granted to it by that call. A key whose
// release fails (its lock key made a list) fails alone, as its own call
// would: the release reports its error and the keys after it are gone.
func TestReleaseMany(t *testing.T) {
	pfx := prefix(t)
	calls := &scriptCalls{}
	a, rdb := hookedLocker(t, pfx, 3*time.Second, calls)
	b := newLockers(t, testbed.Get(t).RedisAddr, pfx, 1)[0]
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys, lease := holdKeys(t, ctx, a, "many", 8, 2)
	// many5's lock now belongs to another token, as after an expiry.
	stolen := pfx + ":{many5}"
	if err := rdb.Set(ctx, stolen, "5:other7:someone1:1:", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// many6's lock key is a list: its release fails.
	broken := pfx + ":{many6}"
	if err := rdb.Del(ctx, broken).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, broken, "x").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), broken) })
	// A session of the other Locker waits for many3.
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, locktest.Owner("waiter"), []lockmgr.Key{{Name: "many3", Rule: "r"}})
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, ctx, rdb, pfx+":{many3}:q")
	calls.on.Store(true)
	if err := lease.Release(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("release with many6's lock key a list: %v; want its WRONGTYPE", err)
	}
	calls.on.Store(false)
	if n := calls.n.Load(); n != 1 {
		t.Errorf("the release of 8 keys made %d script calls, want 1", n)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the waiter for many3: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter for many3 was not granted the key the release gave back")
	}
	for _, k := range keys {
		n, err := rdb.Exists(ctx, pfx+":{"+k.Name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int64{true: 1, false: 0}[k.Name == "many5" || k.Name == "many6"]; n != want {
			t.Errorf("%s: lock exists %d after the release, want %d", k.Name, n, want)
		}
	}
	if v := rdb.Get(ctx, stolen).Val(); v != "5:other7:someone1:1:" {
		t.Errorf("the other token's lock of many5 is %q after the release", v)
	}
}

// waitQueued waits until the wait queue q holds a ticket.
func waitQueued(t *testing.T, ctx context.Context, rdb redis.UniversalClient, q string) {
	t.Helper()
	for rdb.ZCard(ctx, q).Val() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("nobody queued in %s", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pipelineCalls records, per pipeline sent while on, its script calls.
type pipelineCalls struct {
	on  atomic.Bool
	mu  sync.Mutex
	per []int
}

func (s *pipelineCalls) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (s *pipelineCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (s *pipelineCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if s.on.Load() {
			n := 0
			for _, c := range cmds {
				if c.Name() == "evalsha" || c.Name() == "eval" {
					n++
				}
			}
			s.mu.Lock()
			s.per = append(s.per, n)
			s.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// TestRenewMany: a lease of several keys held past its TTL is renewed in
// one script call per round (renew_many.lua) for each 64 of its keys,
// and every key stays held.
func TestRenewMany(t *testing.T) {
	pfx := prefix(t)
	calls := &pipelineCalls{}
	// Renewed every third of it: a lock is lost only if the machine stalls
	// the renewals for two thirds of it (2 s), not merely slows them.
	const ttl, hold = 3 * time.Second, 4 * time.Second
	l, rdb := hookedLocker(t, pfx, ttl, calls)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys, lease := holdKeys(t, ctx, l, "renew", 70, 2)
	calls.on.Store(true)
	time.Sleep(hold)
	calls.on.Store(false)
	calls.mu.Lock()
	per := append([]int(nil), calls.per...)
	calls.mu.Unlock()
	if len(per) == 0 {
		t.Fatalf("no renewal in %v with a TTL of %v", hold, ttl)
	}
	for i, n := range per {
		if n != 2 {
			t.Errorf("renewal round %d of a 70-key lease made %d script calls, want 2 (rounds: %v)", i, n, per)
		}
	}
	for _, k := range keys {
		if pttl := rdb.PTTL(ctx, pfx+":{"+k.Name+"}").Val(); pttl <= 0 {
			t.Errorf("%s: lock gone (pttl %v) after %v of a %v TTL held", k.Name, pttl, hold, ttl)
		}
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseManyParts: a lease of 150 keys is released in three calls
// (64, 64 and 22 keys), so no one script holds the server up for all of
// them, and every key is gone.
func TestReleaseManyParts(t *testing.T) {
	pfx := prefix(t)
	calls := &scriptCalls{}
	l, rdb := hookedLocker(t, pfx, 5*time.Second, calls)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys, lease := holdKeys(t, ctx, l, "part", 150, 3)
	calls.on.Store(true)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	calls.on.Store(false)
	if n := calls.n.Load(); n != 3 {
		t.Errorf("the release of 150 keys made %d script calls, want 3", n)
	}
	for _, k := range keys {
		if n := rdb.Exists(ctx, pfx+":{"+k.Name+"}").Val(); n != 0 {
			t.Errorf("%s: lock left after the release", k.Name)
		}
	}
}

// hookedLocker is a Locker with prefix pfx on a client of its own with
// hook added, and that client.
func hookedLocker(t testing.TB, pfx string, ttl time.Duration, hook redis.Hook) (lockmgr.Locker, redis.UniversalClient) {
	t.Helper()
	rdb := newClient(t, testbed.Get(t).RedisAddr)
	rdb.AddHook(hook)
	l := redislock.New(rdb, &redislock.Options{TTL: ttl, Prefix: pfx})
	t.Cleanup(func() { _ = l.Close() })
	return l, rdb
}

// holdKeys acquires n keys, name0 and on, in one lease of one owner;
// every fenced-th key's rule fences writes (the acquire script's hash),
// the others' do not (the fast path's string).
func holdKeys(t *testing.T, ctx context.Context, l lockmgr.Locker, name string, n, fenced int) ([]lockmgr.Key, *lockmgr.Lease) {
	t.Helper()
	var keys []lockmgr.Key
	for i := range n {
		keys = append(keys, lockmgr.Key{Name: fmt.Sprintf("%s%d", name, i), Rule: "r", NoHandoff: i%fenced == 0})
	}
	lease, err := l.Acquire(ctx, locktest.Owner("holder"), keys)
	if err != nil {
		t.Fatal(err)
	}
	return keys, lease
}
