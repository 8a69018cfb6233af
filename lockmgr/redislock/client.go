package redislock

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientOptions returns go-redis options with bounded dial, read, write and
// pool timeouts and few retries, so an unreachable Redis turns into
// lockmgr.ErrUnavailable in about a second instead of a hang. It maps
// rules.yaml's locks.redis: one address is a server, masterName selects
// Sentinel (addrs are then the sentinels), cluster selects Cluster (addrs
// are seed nodes). Pass the result to redis.NewUniversalClient; set
// credentials or TLS on it first if needed.
func ClientOptions(addrs []string, masterName string, cluster bool) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:                 addrs,
		MasterName:            masterName,
		IsClusterMode:         cluster && masterName == "",
		DialTimeout:           500 * time.Millisecond,
		DialerRetries:         1,
		DialerRetryTimeout:    20 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		PoolTimeout:           500 * time.Millisecond,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		MinRetryBackoff:       8 * time.Millisecond,
		MaxRetryBackoff:       64 * time.Millisecond,
	}
}
