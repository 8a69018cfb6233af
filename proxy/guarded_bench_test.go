package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// BenchmarkGuardedUpdate is one client's autocommit UPDATE of its own row,
// one at a time: directly, through lockproxy with no rule on the table
// (the relay's cost), through lockproxy with a lock rule on write and
// the Redis lock backend (the guarded statement's cost: the relay's, the
// analysis, the lock set and one Redis round trip; the release is in the
// background, every release goes to Redis), the same with
// locks.redis.release_window at 1 ms (the release rides in the next
// statement's acquire pipeline), the same with lockproxy's defaults for
// the Redis backend (guarded_defaults: the release window and local
// hand-offs, so the next statement of the session takes its own held
// release over without Redis, as lockproxy run from its configuration
// does), and with the rule on the in-memory lock backend (the guarded
// work with no lock service round trip: what lockproxy itself adds to
// the relay). The client is
// in this process, so time, CPU (cpu-ns/op: the process's user and
// system time per statement, which on a loaded host moves less than the
// time) and allocations per op include the driver's; compare the arms,
// or one arm across commits.
func BenchmarkGuardedUpdate(b *testing.B) {
	bed := testbed.Get(b)
	base := startProxy(b, nil)
	db := freshDB(b, base)
	testbed.MustExec(b, base.direct(b, db, ""), "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 1000000000)")
	rdb := redis.NewUniversalClient(redislock.ClientOptions([]string{bed.RedisAddr}, "", false))
	b.Cleanup(func() { _ = rdb.Close() })
	arms := []struct {
		name string
		rule bool
		// memory takes the locks in the process instead of Redis.
		memory bool
		// window is the Redis backend's release_window (0: releases
		// are sent when made).
		window time.Duration
		// defaults runs the Redis backend with lockproxy's defaults
		// for locks.redis (window is not used).
		defaults bool
	}{{"relay", false, false, 0, false}, {"guarded", true, false, 0, false}, {"guarded_window_1ms", true, false, time.Millisecond, false},
		{"guarded_defaults", true, false, 0, true}, {"guarded_memory", true, true, 0, false}}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) { benchUpdate(ctx, b, base.direct(b, db, "")) })
	for _, arm := range arms {
		cfg, err := rules.LoadBytes("bench.yaml", []byte(fmt.Sprintf("users: [{user: %s, password: %q}]\nbackends: {primary: %q}\nlocks: {backend: memory}\n",
			bed.User, bed.Password, bed.PrimaryAddr)))
		if err != nil {
			b.Fatal(err)
		}
		if arm.rule {
			cfg.Rules = []rules.Rule{{Name: "sku", Table: db + ".sku", Key: []string{"sku_id"},
				Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(10 * time.Second)}}
		}
		var locker lockmgr.Locker = memlock.New(nil, nil)
		if !arm.memory {
			opt := &redislock.Options{TTL: 10 * time.Second, Prefix: testbed.UniqueName(b) + arm.name, ReleaseWindow: arm.window}
			if arm.defaults {
				var rc *rules.RedisConfig // nil: every default
				opt.ReleaseWindow, opt.LocalHandoffs, opt.LocalHandoffWindow = rc.Window(), rc.Handoffs(), rc.HandoffWindow()
			}
			locker = redislock.New(rdb, opt)
		}
		b.Cleanup(func() { _ = locker.Close() }) // after the server's shutdown: a held release is sent
		reg := prometheus.NewRegistry()
		p := serveProxy(b, bed, cfg, Options{Logger: zap.NewNop(), Registry: reg, Locker: locker}, reg)
		b.Run(arm.name, func(b *testing.B) { benchUpdate(ctx, b, p.db(b, db, "")) })
	}
}

// benchUpdate runs the UPDATE on one connection of h for b.N times.
func benchUpdate(ctx context.Context, b *testing.B, h *sql.DB) {
	c, err := h.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if _, err := c.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
