// Package redislocktest holds what tests outside redislock need to know of
// its keys' layout, so that each does not carry its own copy of it.
package redislocktest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// TakeOver gives the Redis lock key lock to another holder behind
// lockproxy's back, whatever its form: the lock scripts' hash (its tok
// field) or a fast-path holder's string (#tok ':' tok #own ':' own prio
// ':' fence ':' channel), keeping its expiry. The holder's next renewal or
// release then finds the lock gone from it.
func TakeOver(ctx context.Context, rdb redis.UniversalClient, lock string) error {
	typ, err := rdb.Type(ctx, lock).Result()
	if err != nil {
		return err
	}
	if typ == "string" {
		return rdb.SetArgs(ctx, lock, "22:taken-over-by-the-test0:0:0:", redis.SetArgs{KeepTTL: true}).Err()
	}
	return rdb.HSet(ctx, lock, "tok", "taken-over-by-the-test").Err()
}
