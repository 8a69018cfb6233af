package redislock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(l.ledger, l.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		h := l.book.Begin(l.token(owner), owner)
		fences, err := leasebook.TakeAll(keys,
			func(k lockmgr.Key) (uint64, error) { return l.acquireKey(ctx, h, k) }, func() { l.release(h) })
		if err != nil {
			return nil, err
		}
		return l.book.Attach(h, keys, fences, l.ledger,
			func(ctx context.Context) error { return l.releaseCtx(ctx, h) }, l.freshCtx)
	})
}

// releaseCtx is the lease's release: one pipelined round trip.
func (l *Locker) releaseCtx(ctx context.Context, h *leasebook.Held) error {
	keys, _ := l.book.StartRelease(h)
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	err := l.releaseKeys(ctx, h.Tok, keys)
	l.book.Forget(h)
	if err != nil {
		if unavailable(err) {
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("redislock: release: %w", err)
	}
	return nil
}

// release gives back what h holds, on a fresh bounded context, after a
// failed or abandoned acquire.
func (l *Locker) release(h *leasebook.Held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		l.opt.Logger.Warn("lock release failed; the lock expires with its lease",
			zap.String("owner", h.Owner.ID()), zap.Error(err))
	}
}

// releaseKeys runs the release script for keys in one pipeline.
func (l *Locker) releaseKeys(ctx context.Context, tok string, keys []lockmgr.Key) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			n := l.names(k.Name)
			cmds[i] = l.sc.release.EvalSha(ctx, p, n.keys()[:3], tok, n.channel)
		}
		return cmds
	})
	return err
}
