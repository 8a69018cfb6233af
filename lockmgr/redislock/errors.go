package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// transientPrefixes are Redis error replies that mean "the service cannot
// answer now", not "the request is wrong": among them OOM (maxmemory
// reached under noeviction; lock keys expire and are released, and a
// grant needs only a few bytes).
var transientPrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS", "BUSY", "OOM"}

// classify turns a Redis error on a call made for key under the caller's
// ctx into the error Acquire returns. A call that ran out of the caller's
// time is a wait timeout, unless Redis itself was seen to be away (refused,
// reset or closed the connection): then the client learns the lock service
// is down (1105), not that it waited too long (1205).
func classify(ctx context.Context, k lockmgr.Key, err error) error {
	if ctx.Err() != nil && !serverAway(err) {
		return lockmgr.WaitError(ctx, k)
	}
	if unavailable(err) {
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrUnavailable, k.Rule, k.Name, err)
	}
	return fmt.Errorf("redislock: rule %q key %q: %w", k.Rule, k.Name, err)
}

func unavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrClosed),
		errors.Is(err, redis.ErrPoolTimeout), errors.As(err, &ne):
		return true
	}
	msg := err.Error()
	for _, p := range transientPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset")
}

// serverAway reports errors that say Redis is not there, as opposed to
// a call that was merely cut short by its context.
func serverAway(err error) bool {
	if errors.As(err, new(wentAway)) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset")
}

// wentAway is a call's failure for want of Redis that its caller's time
// ran out after (twice): Redis was away in the wait.
type wentAway struct{ err error }

func (w wentAway) Error() string { return w.err.Error() }
func (w wentAway) Unwrap() error { return w.err }
