package main

import (
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

// newLocker builds the lock backend rules.yaml names. The returned close
// function releases what the backend holds and closes its client.
func newLocker(cfg rules.LockConfig, reg prometheus.Registerer, log *zap.Logger) (lockmgr.Locker, func(), error) {
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	switch cfg.Backend {
	case "", "memory":
		l := memlock.New(log, m)
		return l, func() { _ = l.Close() }, nil
	case "redis":
		rc := cfg.Redis
		if rc == nil || len(rc.Addrs) == 0 {
			return nil, nil, fmt.Errorf("lockproxy: locks.redis.addrs is required for the redis backend")
		}
		if rc.Mode == "redlock" {
			return nil, nil, fmt.Errorf("lockproxy: locks.redis.mode redlock is not available in this build")
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
		return l, func() { _ = l.Close(); _ = rdb.Close() }, nil
	default:
		return nil, nil, fmt.Errorf("lockproxy: lock backend %q is not available in this build", cfg.Backend)
	}
}
