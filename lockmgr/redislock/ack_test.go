package redislock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestMinReplicasAck, on a Sentinel group (a master, two replicas): with
// MinReplicasAck 2 a lease is returned only once both replicas have the
// grant; asking for 3, more than the group has, the grant is given back
// and asked for again until the wait ends, which then times out naming
// the acknowledgement, and leaves the key free for others.
func TestMinReplicasAck(t *testing.T) {
	g := testbed.StartSentinel(t)
	pfx := prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Timeouts as lockproxy sets them (no shorter than a caller's
	// deadline), so a master slowed by a busy machine is waited for.
	o := redislock.ClientOptions(g.Addrs, g.MasterName, false)
	redislock.BoundByCallers(o, testTTL)
	rdb := redis.NewUniversalClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	locker := func(acks int) *redislock.Locker {
		l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx, MinReplicasAck: acks, Logger: zaptest.NewLogger(t)})
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	replicas := groupReplicas(t, ctx, g)
	if len(replicas) != 2 {
		t.Fatalf("the group has replicas %v, want 2", replicas)
	}

	t.Run("acknowledged", func(t *testing.T) {
		key := []lockmgr.Key{{Name: "acked", Rule: "sku"}}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		lease, err := locker(2).Acquire(wctx, locktest.Owner("a"), key)
		if err != nil {
			t.Fatalf("Acquire with 2 replicas to acknowledge, of 2: %v", err)
		}
		defer func() { _ = lease.Release(ctx) }()
		// Asked at once, without waiting for replication: WAIT did.
		for _, r := range replicas {
			n, err := r.Exists(ctx, pfx+":{acked}").Result()
			if err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("replica %s has no lock key once the lease was returned", r.Options().Addr)
			}
		}
	})

	t.Run("too few replicas", func(t *testing.T) {
		key := []lockmgr.Key{{Name: "unacked", Rule: "sku"}}
		wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer wcancel()
		lease, err := locker(3).Acquire(wctx, locktest.Owner("b"), key)
		if err == nil {
			_ = lease.Release(ctx)
			t.Fatal("Acquire asking 3 replicas of 2 to acknowledge was granted")
		}
		t.Logf("asking 3 replicas of 2: %v", err)
		if !errors.Is(err, lockmgr.ErrWaitTimeout) || !strings.Contains(err.Error(), "2 of 3 replicas") {
			t.Errorf("Acquire asking 3 replicas of 2: %v, want a wait timeout naming 2 of 3 replicas", err)
		}
		// Given back, not left held until its lease ran out.
		octx, ocancel := context.WithTimeout(ctx, testTTL/2)
		defer ocancel()
		other, err := locker(0).Acquire(octx, locktest.Owner("c"), key)
		if err != nil {
			t.Fatalf("the key after the unacknowledged grants: %v, want it free", err)
		}
		_ = other.Release(ctx)
	})
}

// groupReplicas are clients of the Sentinel group's replicas.
func groupReplicas(t *testing.T, ctx context.Context, g *testbed.RedisGroup) []*redis.Client {
	t.Helper()
	s := redis.NewSentinelClient(&redis.Options{Addr: g.Addrs[0]})
	defer s.Close()
	rs, err := s.Replicas(ctx, g.MasterName).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []*redis.Client
	for _, r := range rs {
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r["ip"], r["port"])})
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, c)
	}
	return out
}
