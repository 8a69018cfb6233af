package redislock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestServerLimitsAreUnavailable: a Redis at one of its limits cannot
// serve now, which is lockmgr.ErrUnavailable (a guarded statement waits
// it out within its wait_timeout), not a refusal of the request. Past
// maxclients Redis accepts a connection, answers "ERR max number of
// clients reached" and closes it (go-redis sees the connection break); at
// maxmemory under noeviction it answers a grant's write (SET NX, or a
// lock script) with an "OOM ..." reply. Once the limit is lifted the same
// Locker grants.
func TestServerLimitsAreUnavailable(t *testing.T) {
	testbed.Get(t) // installs redis-server where it is missing
	addr := startRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := []lockmgr.Key{{Name: "limited", Rule: "sku"}}
	grants := func(l lockmgr.Locker, who string) error {
		lease, err := l.Acquire(ctx, locktest.Owner(who), key)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}

	t.Run("maxclients", func(t *testing.T) {
		// The admin client's connection is the only one Redis allows.
		if err := admin.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.ConfigSet(ctx, "maxclients", "1").Err(); err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewUniversalClient(redislock.ClientOptions([]string{addr}, "", false))
		defer rdb.Close()
		l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: prefix(t)})
		defer l.Close()
		if reply := rawReply(t, addr); !strings.HasPrefix(reply, "-ERR max number of clients reached") {
			t.Fatalf("a connection past maxclients was answered %q", reply)
		}
		err := grants(l, "first")
		if !errors.Is(err, lockmgr.ErrUnavailable) {
			t.Fatalf("acquire past maxclients: %v; want lockmgr.ErrUnavailable", err)
		}
		if err := admin.ConfigSet(ctx, "maxclients", "100").Err(); err != nil {
			t.Fatal(err)
		}
		if err := grants(l, "second"); err != nil {
			t.Fatalf("acquire once connections are allowed again: %v", err)
		}
	})

	t.Run("maxmemory", func(t *testing.T) {
		if err := admin.Set(ctx, "ballast", strings.Repeat("x", 3<<20), 0).Err(); err != nil {
			t.Fatal(err)
		}
		maxmemory := func(v string) {
			t.Helper()
			if err := admin.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		defer admin.ConfigSet(context.Background(), "maxmemory", "0")
		// A key without hand-offs (a fenced rule's) takes the lock scripts'
		// path, any other the first ask's SET NX.
		for _, fence := range []bool{false, true} {
			t.Run(fmt.Sprintf("fenced=%v", fence), func(t *testing.T) {
				rdb := redis.NewUniversalClient(redislock.ClientOptions([]string{addr}, "", false))
				defer rdb.Close()
				l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: prefix(t)})
				defer l.Close()
				held := []lockmgr.Key{{Name: "held", Rule: "sku", NoHandoff: fence}}
				other := []lockmgr.Key{{Name: "other", Rule: "sku", NoHandoff: fence}}
				maxmemory("0")
				lease, err := l.Acquire(ctx, locktest.Owner("first"), held)
				if err != nil {
					t.Fatal(err)
				}
				maxmemory("1mb")
				if more, err := l.Acquire(ctx, locktest.Owner("second"), other); err == nil {
					_ = more.Release(ctx)
					t.Fatal("acquire granted with Redis refusing writes (OOM)")
				} else if !errors.Is(err, lockmgr.ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
					t.Fatalf("acquire at maxmemory: %v; want lockmgr.ErrUnavailable naming OOM", err)
				}
				// A release frees memory and must get through.
				if err := lease.Release(ctx); err != nil {
					t.Fatalf("release at maxmemory: %v", err)
				}
				maxmemory("0")
				wctx, cancel := context.WithTimeout(ctx, testTTL/2) // well before the key could expire
				defer cancel()
				again, err := l.Acquire(wctx, locktest.Owner("third"), held)
				if err != nil {
					t.Fatalf("the key released at maxmemory is not free: %v", err)
				}
				if err := again.Release(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// rawReply is what Redis answers a PING on a new connection.
func rawReply(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// startRedis starts a redis-server of this test's own on a free loopback
// port, without persistence, killed when the test ends.
func startRedis(t *testing.T) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not installed (scripts/testbed.sh install): %v", err)
	}
	dir := t.TempDir()
	port := freePortPair(t)
	cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitRedis(ctx, t, addr, func(c *redis.Client) bool { return c.Ping(ctx).Err() == nil })
	return addr
}

// TestReleaseThroughAnOutage: a release Redis could not answer in time
// (it held writes back past the release's deadline: CLIENT PAUSE, as
// during a failover's switch) must not leave the key locked until its
// lease runs out: once Redis answers again, another owner gets the key
// well within a ttl.
func TestReleaseThroughAnOutage(t *testing.T) {
	testbed.Get(t) // installs redis-server where it is missing
	addr := startRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	const ttl = 6 * time.Second
	pfx := prefix(t)
	mk := func() *redislock.Locker {
		rdb := redis.NewUniversalClient(redislock.ClientOptions([]string{addr}, "", false))
		t.Cleanup(func() { _ = rdb.Close() })
		return redislock.New(rdb, &redislock.Options{TTL: ttl, Prefix: pfx, ReleaseWindow: -1})
	}
	holder, other := mk(), mk()
	defer holder.Close()
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, fence := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%v", fence), func(t *testing.T) {
			key := []lockmgr.Key{{Name: fmt.Sprintf("outage-%v", fence), Rule: "sku", NoHandoff: fence}}
			lease, err := holder.Acquire(ctx, locktest.Owner("first"), key)
			if err != nil {
				t.Fatal(err)
			}
			if err := admin.Do(ctx, "client", "pause", "1500", "write").Err(); err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err = lease.Release(rctx)
			rcancel()
			if !errors.Is(err, lockmgr.ErrUnavailable) {
				t.Fatalf("release while Redis held writes back: %v; want lockmgr.ErrUnavailable", err)
			}
			if err := admin.Do(ctx, "client", "unpause").Err(); err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(ctx, ttl/2)
			defer wcancel()
			begin := time.Now()
			next, err := other.Acquire(wctx, locktest.Owner("second"), key)
			if err != nil {
				t.Fatalf("the key released while Redis held writes back is still held %v after: %v", time.Since(begin), err)
			}
			t.Logf("granted %v after Redis answered again", time.Since(begin))
			_ = next.Release(ctx)
		})
	}
}
