package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestClusterKeysSpread: 10,000 distinct lock keys land on all three
// masters of a Cluster, about a third on each. (That each lock's queue,
// expiry and fence share its slot, the scripts prove: Redis refuses a
// script whose keys cross slots.)
func TestClusterKeysSpread(t *testing.T) {
	g := testbed.StartCluster(t)
	pfx := prefix(t)
	rdb := redis.NewUniversalClient(redislock.ClientOptions(g.Addrs, "", true))
	t.Cleanup(func() { _ = rdb.Close() })
	// The cluster has just started: no lease from before a restart to wait for.
	l := redislock.New(rdb, &redislock.Options{TTL: time.Minute, RestartGrace: -1, Prefix: pfx, Logger: zaptest.NewLogger(t)})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const keys, batch = 10_000, 100
	var mu sync.Mutex
	var leases []*lockmgr.Lease
	var wg sync.WaitGroup
	errs := make(chan error, keys/batch)
	for b := range keys / batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks := make([]lockmgr.Key, batch)
			for i := range ks {
				ks[i] = lockmgr.Key{Name: fmt.Sprintf("sku:%d", b*batch+i), Rule: "sku"}
			}
			lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "spread", Session: uint64(b), Start: time.Now()}, ks)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			leases = append(leases, lease)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	perMaster := map[string]int{}
	cc := rdb.(*redis.ClusterClient)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n := 0
		iter := c.Scan(ctx, 0, pfx+":{*}", 1000).Iterator()
		for iter.Next(ctx) {
			if !strings.Contains(iter.Val(), "}:") { // the lock hash, not its queue or fence
				n++
			}
		}
		mu.Lock()
		perMaster[c.Options().Addr] = n
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("locks per master: %v", perMaster)
	total := 0
	for addr, n := range perMaster {
		total += n
		if n < keys/6 { // an even spread gives each about a third
			t.Errorf("master %s holds only %d of %d locks", addr, n, keys)
		}
	}
	if len(perMaster) != 3 || total != keys {
		t.Errorf("%d locks on %d masters; want %d on 3", total, len(perMaster), keys)
	}
	for _, lease := range leases {
		if err := lease.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestFailoverRecovery kills the master that holds a hot lock key, in a
// Sentinel group and in a Cluster, while two Lockers take and release it
// in a loop, and measures how long until the key is granted again. The
// Lockers must follow the promoted replica well before go-redis's own
// once-a-minute refresh of the Cluster slot map would have.
func TestFailoverRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  func(testing.TB) *testbed.RedisGroup
		master func(context.Context, *testbed.RedisGroup, redis.UniversalClient, string) (string, error)
	}{
		{"sentinel", testbed.StartSentinel, sentinelMaster},
		{"cluster", testbed.StartCluster, clusterMaster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.start(t)
			pfx := prefix(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var ls []lockmgr.Locker
			var rdb redis.UniversalClient
			for range 2 {
				rdb = redis.NewUniversalClient(redislock.ClientOptions(g.Addrs, g.MasterName, g.MasterName == ""))
				t.Cleanup(func() { _ = rdb.Close() })
				l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx, Logger: zaptest.NewLogger(t)})
				t.Cleanup(func() { _ = l.Close() })
				ls = append(ls, l)
			}
			loop := startLockLoop(ls, "hot")
			defer loop.stop()
			loop.awaitGrant(t, ctx, time.Now())
			master, err := tc.master(ctx, g, rdb, pfx+":{hot}")
			if err != nil {
				t.Fatal(err)
			}
			if err := g.KillNode(ctx, master); err != nil {
				t.Fatal(err)
			}
			killed := time.Now() // KillNode returns once the process is gone
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			defer rcancel()
			back := loop.awaitGrant(t, rctx, killed)
			loop.stop()
			// The grant proves the Lockers followed the failover; where the
			// key lives now is asked of the group afresh (a client's cached
			// slot map may lag), for a while: gossip spreads the promotion.
			var now string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if now, err = tc.master(ctx, g, nil, pfx+":{hot}"); err == nil && now != master {
					break
				}
				if time.Now().After(deadline) {
					break
				}
			}
			t.Logf("master %s killed; key granted again after %v, on %s; %d grants, errors %v",
				master, back.Sub(killed).Round(time.Millisecond), now, loop.grants, loop.errs)
			if now == master {
				t.Errorf("the key is still on the killed master %s", master)
			}
		})
	}
}

func sentinelMaster(ctx context.Context, g *testbed.RedisGroup, _ redis.UniversalClient, _ string) (string, error) {
	s := redis.NewSentinelClient(&redis.Options{Addr: g.Addrs[0]})
	defer s.Close()
	hp, err := s.GetMasterAddrByName(ctx, g.MasterName).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

func clusterMaster(ctx context.Context, g *testbed.RedisGroup, _ redis.UniversalClient, key string) (string, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: g.Addrs, DialTimeout: 500 * time.Millisecond})
	defer rdb.Close()
	c, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	return c.Options().Addr, nil
}

// lockLoop takes and releases one key through several Lockers in turn,
// recording when each grant came and what the failures were.
type lockLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu     sync.Mutex
	last   time.Time // when the latest successful Acquire began
	grants int
	errs   map[string]int
}

func startLockLoop(ls []lockmgr.Locker, key string) *lockLoop {
	ctx, cancel := context.WithCancel(context.Background())
	loop := &lockLoop{cancel: cancel, errs: map[string]int{}}
	for i, l := range ls {
		loop.wg.Add(1)
		go func() {
			defer loop.wg.Done()
			for n := uint64(0); ctx.Err() == nil; n++ {
				began := time.Now()
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				lease, err := l.Acquire(actx, lockmgr.Owner{Instance: fmt.Sprint(i), Session: n, Start: time.Now()},
					[]lockmgr.Key{{Name: key, Rule: "r"}})
				acancel()
				if err == nil {
					rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
					err = lease.Release(rctx)
					rcancel()
				}
				loop.record(began, err)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return loop
}

func (p *lockLoop) record(began time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.grants++
		if began.After(p.last) {
			p.last = began
		}
	case errors.Is(err, context.Canceled):
	case errors.Is(err, lockmgr.ErrUnavailable):
		p.errs["unavailable"]++
	case errors.Is(err, lockmgr.ErrWaitTimeout):
		p.errs["wait timeout"]++
	case errors.Is(err, lockmgr.ErrDeadlock):
		p.errs["deadlock"]++
	default:
		p.errs[err.Error()]++
	}
}

// awaitGrant waits for a grant asked for after from and returns when it
// was asked for.
func (p *lockLoop) awaitGrant(t *testing.T, ctx context.Context, from time.Time) time.Time {
	t.Helper()
	for {
		p.mu.Lock()
		last := p.last
		p.mu.Unlock()
		if last.After(from) {
			return last
		}
		select {
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("no grant within %v (errors %v)", time.Since(from).Round(time.Millisecond), p.errs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *lockLoop) stop() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
}
