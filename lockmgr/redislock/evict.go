package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// evictGuard remembers why the Redis that holds locks may drop a live
// lock key on its own (a maxmemory with an eviction policy), "" while it
// may not. A server that evicts a held key grants the row to another
// session while the holder's lease is still valid on its clock, so no
// lock is granted while it does. The check runs after the first grant,
// after a grant made while connections were dialled (a reconnect, with
// the restart guard's), at most evictRecheck after the last one (a policy
// changed at run time), and at every grant while a risk is known, so
// fixing the server's policy lifts it at once.
type evictGuard struct {
	why  atomic.Pointer[string]
	next atomic.Int64 // UnixNano when the next check is due; 0: now
}

// evictRecheck is how long a check of the eviction policy is trusted.
const evictRecheck = 10 * time.Second

// due reports whether the next grant must check the policy.
func (g *evictGuard) due() bool {
	return g.why.Load() != nil || time.Now().UnixNano() >= g.next.Load()
}

func (g *evictGuard) risk() string {
	if p := g.why.Load(); p != nil {
		return *p
	}
	return ""
}

func (g *evictGuard) set(why string) {
	if why == "" {
		g.why.Store(nil)
		return
	}
	g.why.Store(&why)
}

// evictionRisk says why a server whose INFO memory section is info may
// evict lock keys, "" when it cannot: without maxmemory nothing is
// evicted, and with it only noeviction keeps every key (lock keys carry a
// TTL, so the volatile-* policies evict them too).
func evictionRisk(info string) string {
	var maxmemory int64
	policy := ""
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "maxmemory:"); ok {
			maxmemory, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
			policy = v
		}
	}
	if maxmemory == 0 || policy == "noeviction" || policy == "" {
		return ""
	}
	return fmt.Sprintf("Redis may evict held lock keys (maxmemory %d with maxmemory-policy %s): set maxmemory-policy noeviction or maxmemory 0", maxmemory, policy)
}

// checkEviction asks the server that holds key whether it may evict lock
// keys and remembers the answer; an INFO the operator disabled leaves
// what was known.
func (l *Locker) checkEviction(ctx context.Context, key string) (string, error) {
	info, err := l.info(ctx, key, "memory")
	if err != nil {
		if !unavailable(err) && ctx.Err() == nil {
			// INFO refused: the policy cannot be known; do not ask at
			// every grant.
			l.evict.next.Store(time.Now().Add(evictRecheck).UnixNano())
		}
		return l.evict.risk(), err
	}
	why := evictionRisk(info)
	l.evict.set(why)
	l.evict.next.Store(time.Now().Add(evictRecheck).UnixNano())
	return why, nil
}

// info reads a section of INFO from the server that holds key.
func (l *Locker) info(ctx context.Context, key, section string) (string, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return "", err
		}
		return c.Info(ctx, section).Result()
	}
	return l.rdb.Info(ctx, section).Result()
}

// Ready reports whether Redis answers and keeps every lock key (for
// /readyz): on a Cluster, every master.
func (l *Locker) Ready(ctx context.Context) error {
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			if isRefused(err) {
				return c.Ping(ctx).Err() // INFO disabled: reachability only
			}
			return err
		}
		if why := evictionRisk(info); why != "" {
			return fmt.Errorf("%s (%s)", why, c.Options().Addr)
		}
		return nil
	}
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, check)
	}
	info, err := l.rdb.Info(ctx, "memory").Result()
	if err != nil {
		if isRefused(err) {
			return l.rdb.Ping(ctx).Err()
		}
		return err
	}
	if why := evictionRisk(info); why != "" {
		return fmt.Errorf("%s", why)
	}
	return nil
}

// isRefused reports a command the server refused (renamed, disabled, not
// permitted), as opposed to a server that did not answer.
func isRefused(err error) bool {
	var re redis.Error
	return err != nil && !unavailable(err) && errors.As(err, &re)
}
