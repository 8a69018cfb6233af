package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

var (
	errLeaseGone = errors.New("etcdlock: the session lease expired or was revoked")
	errRunOut    = errors.New("etcdlock: lease validity ran out before a keep-alive succeeded")
	errEntryGone = errors.New("etcdlock: own lock entry vanished while waiting")
	// errAway: a call ran out of its caller's time while the client had
	// no connection to etcd: an outage, not a wait.
	errAway = errors.New("etcdlock: etcd not reachable")
)

// away is err, marked errAway when the call ran out of ctx's time while
// the client's connection to etcd was not ready (connecting, or failing).
func (l *Locker) away(ctx context.Context, err error) error {
	if ctx.Err() == nil || err == nil {
		return err
	}
	cc := l.cli.ActiveConnection()
	if cc == nil {
		return err
	}
	if st := cc.GetState(); st != connectivity.Ready && st != connectivity.Idle {
		return fmt.Errorf("%w (connection %s): %w", errAway, st, err)
	}
	return err
}

// classify turns an etcd error on a call made for key k under the caller's
// ctx into the error Acquire returns.
func classify(ctx context.Context, k lockmgr.Key, err error) error {
	switch {
	case errors.Is(err, errAway):
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrUnavailable, k.Rule, k.Name, err)
	case ctx.Err() != nil:
		return lockmgr.WaitError(ctx, k)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, k.Rule, k.Name, err)
	case unavailable(err):
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrUnavailable, k.Rule, k.Name, err)
	}
	return fmt.Errorf("etcdlock: rule %q key %q: %w", k.Rule, k.Name, err)
}

// unavailable reports whether err means etcd could not answer in time.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTooManyRequests, rpctypes.ErrLeaderChanged,
		rpctypes.ErrNotCapable, rpctypes.ErrStopped, rpctypes.ErrUnhealthy} {
		if errors.Is(err, e) {
			return true
		}
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return false
	}
	st := gs.GRPCStatus() // its own message, not the wrapping's
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return true
	case codes.Unknown:
		// A server whose gRPC hands a handler's context error on as it
		// is (etcd 3.4's) answers a request whose deadline ran out
		// there with code Unknown and the context's message.
		return st.Message() == context.DeadlineExceeded.Error() || st.Message() == context.Canceled.Error()
	}
	return false
}

// deadlockErr is the error of a wait of o for k that a wound ended.
var deadlockErr = leasebook.DeadlockErr
