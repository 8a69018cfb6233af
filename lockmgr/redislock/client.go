package redislock

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/rawsock"
)

// ClientOptions returns go-redis options with bounded dial, read, write and
// pool timeouts and few retries, so an unreachable Redis turns into
// lockmgr.ErrUnavailable in about a second instead of a hang. It maps
// rules.yaml's locks.redis: one address is a server, masterName selects
// Sentinel (addrs are then the sentinels), cluster selects Cluster (addrs
// are seed nodes). Pass the result to redis.NewUniversalClient; set
// credentials or TLS on it first if needed.
//
// Its plain TCP and Unix connections are read and written through
// rawsock (go-redis's own dialer and keep-alive otherwise): through
// net.Conn, each lock call's socket write and read entered the
// scheduler's syscall state, and the runtime's monitor thread polling for
// them was a tenth of lockproxy's CPU under sysbench with Redis locks.
// Connections over TLS are dialled as go-redis dials them.
func ClientOptions(addrs []string, masterName string, cluster bool) *redis.UniversalOptions {
	o := &redis.UniversalOptions{
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
		// Pipelines (batched acquires and releases) share the connections
		// of single commands: a pool of their own would dial its first
		// connections under load, and a new connection makes the next
		// grant check whether the server restarted (restartGuard), a
		// round trip more on the client's path; their 128 KiB buffers
		// are not needed for lock calls either.
		PipelinePoolSize: -1,
	}
	o.Dialer = rawsock.DialFunc(&net.Dialer{Timeout: o.DialTimeout, KeepAliveConfig: rawsock.KeepAlive},
		func() *tls.Config { return o.TLSConfig })
	return o
}

// BoundByCallers raises o's read, write and pool timeouts to at least
// longest, the longest deadline a caller gives a call (the longest
// wait_timeout, the lease): every call a Locker makes has a deadline of
// its own (the statement's wait, the lease being renewed, OpTimeout), and
// go-redis cuts a read at the earlier of that deadline and ReadTimeout, so
// a ReadTimeout below the caller's deadline would turn a Redis that
// answers slower than it, but within the wait, into one that is down.
// Calls go-redis makes on its own (Cluster slot reloads, Sentinel
// lookups) are bounded by longest too.
func BoundByCallers(o *redis.UniversalOptions, longest time.Duration) {
	o.ReadTimeout = max(o.ReadTimeout, longest)
	o.WriteTimeout = max(o.WriteTimeout, longest)
	o.PoolTimeout = max(o.PoolTimeout, longest)
}
