package redislock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// slowRedis makes every call take delay while on is set, as a busy or
// distant Redis does: the reply comes after delay unless the caller's
// deadline ends first.
type slowRedis struct {
	on    atomic.Bool
	delay time.Duration
}

func (s *slowRedis) wait(ctx context.Context) error {
	if !s.on.Load() {
		return nil
	}
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handshake: a new connection's HELLO and CLIENT SETINFO, which go-redis
// sends through the hooks too; left fast so that the delay is the
// commands' own.
func handshake(c redis.Cmder) bool {
	return c.Name() == "hello" || c.Name() == "client"
}

func (s *slowRedis) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *slowRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if handshake(cmd) {
			return next(ctx, cmd)
		}
		if err := s.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (s *slowRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if handshake(cmds[0]) {
			return next(ctx, cmds)
		}
		if err := s.wait(ctx); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// TestSlowRedisKeepsLeases: slow is not down. With every Redis call
// taking longer than OpTimeout (but well inside the lease), renewals still
// succeed, so a lease held for several ttls stays valid, and its release
// goes through: each renewal is bounded by the leases it renews, not by a
// fixed shorter timeout.
func TestSlowRedisKeepsLeases(t *testing.T) {
	bed := testbed.Get(t)
	rdb := newClient(t, bed.RedisAddr)
	slow := &slowRedis{delay: 1200 * time.Millisecond}
	rdb.AddHook(slow)
	pfx := prefix(t)
	l := redislock.New(rdb, &redislock.Options{TTL: testTTL, OpTimeout: time.Second, Prefix: pfx, Logger: zaptest.NewLogger(t)})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, locktest.Owner("slow"), []lockmgr.Key{{Name: "slow-row", Rule: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	slow.on.Store(true)
	for end := time.Now().Add(4 * testTTL); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := lease.Err(); err != nil {
			t.Fatalf("lease lost while Redis was slow: %v", err)
		}
	}
	if !lease.Valid() {
		t.Fatal("lease not valid after four ttls of slow renewals")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release through a slow Redis: %v", err)
	}
	slow.on.Store(false)
	if n, err := rdb.Exists(ctx, pfx+":{slow-row}").Result(); err != nil || n != 0 {
		t.Errorf("lock key after the release: exists %d, %v", n, err)
	}
}
