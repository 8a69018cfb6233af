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
			l.deleteLater(h.sess, paths)
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("etcdlock: release: %w", err)
	}
	return nil
}

// deleteLater deletes the entries a release could not because etcd did
// not answer in time, or the observe notes an EndObserve could not. They are attached to the session lease, which its
// keep-alives keep alive once etcd answers again: left alone, they would
// hold their keys for as long as the session lives, and every other owner
// would wait for a lease nobody holds. It tries again in the background
// (leasebook.RetryUntilDone) until a delete is answered (an error that
// is not unavailability ends it too: trying again would not help), s is no longer
// the Locker's session (its lease, and the entries with it, end within a
// ttl without keep-alives), or the Locker stops (the same: Close leaves
// the session to expire). An entry's name (the session lease's id and a
// sequence number of the Locker; a note's, its owner's id) is its lease's
// alone, so a late delete takes nothing from anyone else.
func (l *Locker) deleteLater(s *session, paths []string) {
	if len(paths) == 0 {
		return
	}
	l.mu.Lock() // with stop: no task starts after it
	if l.closed() {
		l.mu.Unlock()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	ops := make([]clientv3.Op, len(paths))
	for i, p := range paths {
		ops[i] = clientv3.OpDelete(p)
	}
	go func() {
		defer l.wg.Done()
		leasebook.RetryUntilDone(l.ctx, func() bool {
			l.mu.Lock()
			live := l.sess == s
			l.mu.Unlock()
			if !live {
				return true
			}
			ctx, cancel := context.WithTimeout(l.ctx, l.opt.OpTimeout)
			_, err := l.cli.Txn(ctx).Then(ops...).Commit()
			cancel()
			switch {
			case err == nil:
				l.opt.Logger.Info("entries a failed release or end of observation left are deleted", zap.Int("entries", len(paths)))
			case !unavailable(err):
				l.opt.Logger.Warn("entries a failed release or end of observation left cannot be deleted; they go with the session", zap.Error(err))
			default:
				return false
			}
			return true
		})
	}()
}

// release gives back what h holds or queued for, on a fresh bounded
// context, after a failed acquire.
func (l *Locker) release(h *held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		l.opt.Logger.Warn("lock release failed; its entries are deleted once etcd answers",
			zap.String("owner", h.Owner.ID()), zap.Error(err))
	}
}
