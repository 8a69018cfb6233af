package main

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// lockBackend is the lock service as the process uses it.
type lockBackend struct {
	locker lockmgr.Locker
	close  func()
	// ping reports whether the lock service answers (for /readyz).
	ping func(ctx context.Context) error
}

// newLocker builds the lock backend rules.yaml names.
func newLocker(cfg rules.LockConfig, reg prometheus.Registerer, log *zap.Logger) (*lockBackend, error) {
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case "", "memory":
		l := memlock.New(log, m)
		return &lockBackend{locker: l, close: func() { _ = l.Close() }, ping: func(context.Context) error { return nil }}, nil
	case "redis":
		rc := cfg.Redis
		if rc == nil || len(rc.Addrs) == 0 {
			return nil, fmt.Errorf("lockproxy: locks.redis.addrs is required for the redis backend")
		}
		if rc.Mode == "redlock" {
			return nil, fmt.Errorf("lockproxy: locks.redis.mode redlock is not available in this build")
		}
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs:         rc.Addrs,
			MasterName:    rc.MasterName,
			IsClusterMode: rc.Cluster,
			Username:      rc.Username,
			Password:      rc.Password,
			DB:            rc.DB,
			DialTimeout:   time.Second,
			ReadTimeout:   time.Second,
			WriteTimeout:  time.Second,
		})
		l := redislock.New(rdb, &redislock.Options{TTL: cfg.TTL.D(), Logger: log, Metrics: m})
		return &lockBackend{locker: l, close: func() { _ = l.Close(); _ = rdb.Close() },
			ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}, nil
	default:
		return nil, fmt.Errorf("lockproxy: lock backend %q is not available in this build", cfg.Backend)
	}
}
