package lockmgr

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with %w and add the rule and key; test
// them with errors.Is.
var (
	// ErrWaitTimeout: the lock was not granted before the context's
	// deadline. The proxy answers MySQL error 1205; the transaction stays open.
	ErrWaitTimeout = errors.New("lockmgr: wait timeout")
	// ErrDeadlock: the owner was chosen as the victim of a (possible)
	// deadlock by wound-wait. The proxy answers 1213 and rolls back.
	ErrDeadlock = errors.New("lockmgr: deadlock")
	// ErrLeaseLost: a held lease could not be renewed or was found to belong
	// to someone else. The proxy answers 1213 and rolls back.
	ErrLeaseLost = errors.New("lockmgr: lease lost")
	// ErrUnavailable: the lock service could not be reached in time. The
	// proxy answers 1105 (or passes through, per on_unavailable).
	ErrUnavailable = errors.New("lockmgr: unavailable")
	// ErrReleased is what Lease.Err reports after Release.
	ErrReleased = errors.New("lockmgr: lease released")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("lockmgr: locker closed")
	// ErrInvalidKey: an empty key or an invalid owner was passed to Acquire.
	ErrInvalidKey = errors.New("lockmgr: invalid key")
)

// WaitError turns the end of a wait for key into the error Acquire returns:
// ErrWaitTimeout when ctx's deadline passed, the context's own error
// (wrapped) when it was cancelled.
func WaitError(ctx context.Context, k Key) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: rule %q key %q: %w", ErrWaitTimeout, k.Rule, k.Name, err)
	}
	return fmt.Errorf("lockmgr: waiting for rule %q key %q: %w", k.Rule, k.Name, err)
}

// Result names the outcome of an Acquire for the
// lockproxy_lock_acquire_total metric: acquired, timeout, deadlock,
// unavailable or error.
func Result(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, ErrWaitTimeout):
		return "timeout"
	case errors.Is(err, ErrDeadlock):
		return "deadlock"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "error"
	}
}
