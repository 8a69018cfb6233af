package contend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrAppLock is returned when the application-side lock could not be taken
// or given back.
var ErrAppLock = errors.New("contend: application lock")

// AppLockRetry is how long a client sleeps between two failed SET NX.
const AppLockRetry = 5 * time.Millisecond

// appLockTTL is the lock's expiry (PX), as an application would set it.
const appLockTTL = 10 * time.Second

// appLockWait is how long a client tries before giving up on the lock.
const appLockWait = 30 * time.Second

// release deletes the lock only if this client still owns it.
var release = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// AppLocked wraps inner in the lock an application would take itself in
// Redis: SET bench:lock:<sku> <token> NX PX 10000, retried after a 5 ms
// sleep until granted, then inner, then an owner-checked Lua release.
// prefix keeps the keys of one run apart from others.
func AppLocked(rdb *redis.Client, prefix string, key Key, inner Op) Op {
	var seq atomic.Int64
	return func(ctx context.Context, client int) (Outcome, error) {
		lk := prefix + strconv.FormatInt(key(client), 10)
		token := strconv.FormatInt(seq.Add(1), 10) + "/" + strconv.Itoa(client)
		deadline := time.Now().Add(appLockWait)
		for {
			ok, err := rdb.SetNX(ctx, lk, token, appLockTTL).Result()
			if err != nil {
				return 0, fmt.Errorf("%w: SET NX %s: %v", ErrAppLock, lk, err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%w: %s not granted in %s", ErrAppLock, lk, appLockWait)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(AppLockRetry):
			}
		}
		out, err := inner(ctx, client)
		if rerr := release.Run(context.WithoutCancel(ctx), rdb, []string{lk}, token).Err(); rerr != nil && err == nil {
			err = fmt.Errorf("%w: release %s: %v", ErrAppLock, lk, rerr)
		}
		return out, err
	}
}

// NewRedis is a client for addr with a pool for conns concurrent clients.
func NewRedis(addr string, conns int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: conns, MinIdleConns: 1})
}
