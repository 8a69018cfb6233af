package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

var (
	errExpired  = errors.New("zklock: the ZooKeeper session expired")
	errRunOut   = errors.New("zklock: lease validity ran out before the server answered again")
	errNodeGone = errors.New("zklock: own lock znode vanished while waiting")
	errSession  = errors.New("zklock: the ZooKeeper session changed during a request")
)

// classify turns a ZooKeeper error on a call made for key k under the
// caller's ctx into the error Acquire returns.
func classify(ctx context.Context, k lockmgr.Key, err error) error {
	switch {
	case ctx.Err() != nil:
		return lockmgr.WaitError(ctx, k)
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, errSession):
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, k.Rule, k.Name, err)
	case unavailable(err):
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrUnavailable, k.Rule, k.Name, err)
	}
	return fmt.Errorf("zklock: rule %q key %q: %w", k.Rule, k.Name, err)
}

// unavailable reports whether err means ZooKeeper could not answer in time.
func unavailable(err error) bool {
	for _, e := range []error{context.DeadlineExceeded, context.Canceled, zk.ErrNoServer,
		zk.ErrConnectionClosed, zk.ErrClosing, zk.ErrSessionMoved} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deadlockErr is the error of a wait of o for k that a wound ended.
var deadlockErr = leasebook.DeadlockErr
