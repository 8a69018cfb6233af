package redislock

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// restartGuard notices that connections were (re)made and, when the
// server turns out younger than RestartGrace (one ttl), refuses grants
// until it is that old: a server restarted without persistence has
// forgotten locks whose leases may still be valid on their holders' clocks;
// meanwhile those holders restore them at their next renewal.
type restartGuard struct {
	dials atomic.Uint64
	// dialErr is the last dial's failure, nil once a dial succeeds: what
	// a call cut short by its caller's deadline met meanwhile.
	dialErr atomic.Pointer[error]

	mu    sync.Mutex
	until time.Time // monotonic
}

var _ redis.Hook = (*restartGuard)(nil)

// DialHook counts successful dials.
func (g *restartGuard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			g.dials.Add(1)
			g.dialErr.Store(nil)
		} else if ctx.Err() == nil {
			g.dialErr.Store(&err)
		}
		return c, err
	}
}

// ProcessHook is a pass-through.
func (g *restartGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook is a pass-through.
func (g *restartGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// away is the error a call that ran out of its caller's time should
// report: the server unreachable (the last dial failed) rather than a
// wait that timed out, so that the caller sees an outage as one.
func (g *restartGuard) away(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if d := g.dialErr.Load(); d != nil {
		return *d
	}
	return err
}

// remaining is how long grants are still refused.
func (g *restartGuard) remaining() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until.IsZero() {
		return 0
	}
	return time.Until(g.until)
}

func (g *restartGuard) hold(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until := time.Now().Add(d); until.After(g.until) {
		g.until = until
	}
}

// checkRestart is called after a grant. If connections were dialled since
// the request was prepared (dials), it asks the server's uptime; a server
// younger than one ttl means the grant cannot be trusted: it is undone, the
// guard is set, and ok is false. It asks too whether the server may evict
// lock keys (see evictGuard), and then undoes the grant and fails with
// lockmgr.ErrUnavailable, so that the statement is not run.
func (a *attempt) checkRestart(ctx context.Context, dials uint64) (ok bool, err error) {
	l := a.l
	dialled := l.restart.dials.Load() != dials
	if !dialled && l.restart.remaining() <= 0 && !l.evict.due() {
		return true, nil
	}
	if l.opt.RestartGrace >= 0 && (dialled || l.restart.remaining() > 0) {
		uptime, err := l.uptime(ctx, a.n.lock)
		switch {
		case err == nil && uptime >= l.opt.RestartGrace:
		case err != nil && ctx.Err() == nil && !unavailable(err):
			// INFO refused (renamed or disabled by the operator):
			// restarts cannot be detected here; keep the grant rather
			// than never grant.
			l.opt.Logger.Warn("cannot read Redis uptime; a restart without persistence may go unnoticed", zap.Error(err))
		case err == nil:
			l.restart.hold(l.opt.RestartGrace - uptime + time.Second)
			l.opt.Logger.Warn("Redis restarted less than one lease ago: holding back grants until leases from before the restart have run out")
			return false, a.undoGrant(ctx, nil)
		default:
			return false, a.undoGrant(ctx, err)
		}
	}
	why, err := l.checkEviction(ctx, a.n.lock)
	if err != nil && (ctx.Err() != nil || unavailable(err)) {
		return false, a.undoGrant(ctx, err)
	}
	if why == "" {
		return true, nil
	}
	l.opt.Logger.Error("refusing lock grants: " + why)
	if err := a.undoGrant(ctx, nil); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%w: rule %q key %q: %s", lockmgr.ErrUnavailable, a.k.Rule, a.k.Name, why)
}

// undoGrant gives back the key a grant that cannot be trusted made, and
// returns err (or the undo's own failure), classified for the caller's
// ctx.
func (a *attempt) undoGrant(ctx context.Context, err error) error {
	uctx, cancel := a.l.freshCtx()
	defer cancel()
	// No grant in the undo: the server may not yet know every lease.
	if uerr := a.l.releaseKeys(uctx, a.h.Tok, []lockmgr.Key{a.k}, false); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		return classify(ctx, a.k, err)
	}
	return nil
}

// uptime asks the server that holds key how long it has been up.
func (l *Locker) uptime(ctx context.Context, key string) (time.Duration, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	var info string
	var err error
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		var c *redis.Client
		if c, err = cc.MasterForKey(ctx, key); err == nil {
			info, err = c.Info(ctx, "server").Result()
		}
	} else {
		info, err = l.rdb.Info(ctx, "server").Result()
	}
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(s) * time.Second, nil
		}
	}
	return 0, nil // unknown: treat as just restarted
}
