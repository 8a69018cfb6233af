package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestEvictingRedisRefused: a Redis that may evict keys (a maxmemory with
// a policy other than noeviction; lock keys carry a TTL, so the volatile
// policies count) could drop a held lock and grant the row again: no lock
// is granted from it, Acquire fails with ErrUnavailable saying why, and
// Ready (what /readyz asks) fails too; once the policy is noeviction, or
// there is no maxmemory, locks are granted again. A private master: the
// policy is the whole server's.
func TestEvictingRedisRefused(t *testing.T) {
	g := testbed.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewUniversalClient(redislock.ClientOptions(g.Addrs, g.MasterName, false))
	t.Cleanup(func() { _ = rdb.Close() })
	set := func(kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if err := rdb.ConfigSet(ctx, kv[i], kv[i+1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	pfx := prefix(t)
	// The group's master started moments ago: no restart hold-back.
	l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx, RestartGrace: -1})
	defer l.Close()
	key := []lockmgr.Key{{Name: "row-1", Rule: "sku"}}

	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "volatile-lru"} {
		set("maxmemory", "104857600", "maxmemory-policy", policy)
		_, err := l.Acquire(ctx, locktest.Owner("a"), key)
		if !errors.Is(err, lockmgr.ErrUnavailable) || !strings.Contains(err.Error(), "maxmemory-policy "+policy) {
			t.Fatalf("Acquire from a Redis with maxmemory-policy %s: %v, want ErrUnavailable naming the policy", policy, err)
		}
		if n, err := rdb.Exists(ctx, pfx+":{row-1}").Result(); err != nil || n != 0 {
			t.Errorf("the refused grant left its lock key in Redis (%d, %v)", n, err)
		}
		if err := l.Ready(ctx); err == nil || !strings.Contains(err.Error(), "noeviction") {
			t.Errorf("Ready with maxmemory-policy %s: %v, want it to say noeviction", policy, err)
		}
	}
	set("maxmemory-policy", "noeviction")
	lease, err := l.Acquire(ctx, locktest.Owner("a"), key)
	if err != nil {
		t.Fatalf("Acquire once the policy is noeviction: %v", err)
	}
	_ = lease.Release(ctx)
	if err := l.Ready(ctx); err != nil {
		t.Errorf("Ready with noeviction: %v", err)
	}
	set("maxmemory", "0", "maxmemory-policy", "allkeys-lru")
	if err := l.Ready(ctx); err != nil {
		t.Errorf("Ready without maxmemory: %v", err)
	}
	lease, err = l.Acquire(ctx, locktest.Owner("b"), key)
	if err != nil {
		t.Fatalf("Acquire without maxmemory: %v", err)
	}
	_ = lease.Release(ctx)
}
