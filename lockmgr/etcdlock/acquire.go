package etcdlock

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(l.ledger, l.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		s, err := l.session(ctx)
		if err != nil {
			if errors.Is(err, errClosedNow) {
				return nil, lockmgr.ErrClosed
			}
			return nil, classify(ctx, keys[0], l.away(ctx, err))
		}
		h, st := l.begin(owner, s)
		fences, err := leasebook.TakeAll(keys,
			func(k lockmgr.Key) (uint64, error) { return l.acquireKey(ctx, h, st, k) }, func() { l.release(h) })
		if err != nil {
			return nil, err
		}
		return leasebook.AttachSession(&l.mu, &h.Member, s.Session, keys, fences, l.ledger,
			func(ctx context.Context) error { return l.releaseCtx(ctx, h) }, l.freshCtx)
	})
}

// releaseCtx is the lease's release: one transaction deleting the own
// entries (compare-free: they are unique to this lease), idempotent.
func (l *Locker) releaseCtx(ctx context.Context, h *held) error {
	l.mu.Lock()
	paths := h.paths
	l.mu.Unlock()
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	ops := make([]clientv3.Op, 0, len(paths)+1)
	for _, p := range paths {
		ops = append(ops, clientv3.OpDelete(p))
	}
	if l.forget(h) {
		ops = append(ops, clientv3.OpDelete(l.woundKey(l.id, h.Owner.ID())))
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := l.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		if unavailable(err) {
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("etcdlock: release: %w", err)
	}
	return nil
}

// release gives back what h holds or queued for, on a fresh bounded
// context, after a failed acquire.
func (l *Locker) release(h *held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		l.opt.Logger.Warn("lock release failed; the entries go with the session lease",
			zap.String("owner", h.Owner.ID()), zap.Error(err))
	}
}
