package redislock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestClusterConformance runs the conformance suite against a real
// three-master Redis Cluster on private loopback ports, which this test
// starts and stops: every key, queue and channel of one lock must stay on
// one slot, and wake-ups and wounds must cross nodes.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	testbed.Get(t) // installs redis-server where it is missing
	addrs := startCluster(t, 3)
	pfx := prefix(t)
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker {
			out := make([]lockmgr.Locker, n)
			for i := range out {
				rdb := redis.NewUniversalClient(redislock.ClientOptions(addrs, "", true))
				t.Cleanup(func() { _ = rdb.Close() })
				out[i] = redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx, Logger: zaptest.NewLogger(t)})
			}
			return out
		},
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*redislock.Locker).Abandon() },
	})
}

// startCluster starts n redis-server cluster nodes and joins them.
func startCluster(t *testing.T, n int) []string {
	server, err := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server/redis-cli not installed (scripts/testbed.sh install)")
		}
		t.Skip("redis-server/redis-cli not installed")
	}
	dir := t.TempDir()
	var addrs []string
	for range n {
		port := freePortPair(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", dir, port),
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", fmt.Sprintf("%s/%d.log", dir, port))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addrs = append(addrs, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range addrs {
		waitRedis(ctx, t, a, func(c *redis.Client) bool { return c.Ping(ctx).Err() == nil })
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		waitRedis(ctx, t, a, func(c *redis.Client) bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	return addrs
}

func waitRedis(ctx context.Context, t *testing.T, addr string, ready func(*redis.Client) bool) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for !ready(c) {
		select {
		case <-ctx.Done():
			t.Fatalf("redis %s not ready", addr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePortPair finds a port p with p+10000 (the cluster bus) also free.
func freePortPair(t *testing.T) int {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if p+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000)); err == nil {
			_ = bus.Close()
			return p
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}
