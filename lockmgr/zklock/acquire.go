package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(l.ledger, l.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		if err := l.ensureSetup(ctx); err != nil {
			return nil, classify(ctx, keys[0], err)
		}
		h, st := l.begin(owner)
		fences, err := leasebook.TakeAll(keys,
			func(k lockmgr.Key) (uint64, error) { return l.acquireKey(ctx, h, st, k) }, func() { l.release(h) })
		if err != nil {
			if l.closed() {
				return nil, lockmgr.ErrClosed
			}
			return nil, err
		}
		return leasebook.AttachSession(&l.mu, &h.Member, h.sess.Session, keys, fences, l.ledger,
			func(ctx context.Context) error { return l.releaseCtx(ctx, h) }, l.freshCtx)
	})
}

// releaseCtx is the lease's release: delete the own znodes (in parallel),
// idempotent. A znode whose create was never answered is looked up by its
// unique name prefix.
func (l *Locker) releaseCtx(ctx context.Context, h *held) error {
	l.mu.Lock()
	nodes := h.nodes
	sid := l.conn.SessionID()
	if h.sess != nil {
		sid = h.sess.id
	}
	l.mu.Unlock()
	l.forget(h)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.deleteNode(ctx, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var left []ownNode
		for i, e := range errs {
			if e != nil && unavailable(e) {
				left = append(left, nodes[i])
			}
		}
		l.deleteLater(sid, left)
		if unavailable(err) {
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("zklock: release: %w", err)
	}
	return nil
}

// deleteLater deletes the znodes a release could not because ZooKeeper
// did not answer in time, or the observe notes an EndObserve could not. They are ephemeral nodes of session sid, which the client
// keeps alive across a disconnection shorter than its timeout: left
// alone, they would hold their keys for as long as the session lives, and
// every other owner would wait for a lease nobody holds. It tries again
// in the background (leasebook.RetryUntilDone) until every delete is
// answered (an error that is not unavailability drops its znode from the
// tries: trying again would not help), the connection's session is no longer sid (the znodes ended
// with it), or the Locker stops (its connection closes, ending the
// session). A lock znode's name (the Locker's id and a sequence number)
// is its lease's alone, and a note's path is the one its create answered,
// so a late delete takes nothing from anyone else.
func (l *Locker) deleteLater(sid int64, nodes []ownNode) {
	if len(nodes) == 0 || sid == 0 {
		return
	}
	l.mu.Lock() // with stop: no task starts after it
	if l.closed() {
		l.mu.Unlock()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		deleted := 0
		leasebook.RetryUntilDone(l.ctx, func() bool {
			if l.conn.SessionID() != sid {
				return true
			}
			ctx, cancel := context.WithTimeout(l.ctx, l.opt.OpTimeout)
			left := nodes[:0]
			for _, n := range nodes {
				switch err := l.deleteNode(ctx, n); {
				case err == nil:
					deleted++
				case unavailable(err):
					left = append(left, n)
				default:
					l.opt.Logger.Warn("a znode a failed release or end of observation left cannot be deleted; it goes with the session", zap.Error(err))
				}
			}
			cancel()
			if len(left) == 0 {
				if deleted > 0 {
					l.opt.Logger.Info("znodes a failed release or end of observation left are deleted", zap.Int("znodes", deleted))
				}
				return true
			}
			nodes = left
			return false
		})
	}()
}

// deleteNode deletes an own znode; one already gone is fine.
func (l *Locker) deleteNode(ctx context.Context, n ownNode) error {
	paths := []string{n.path}
	if n.path == "" {
		names, err := call(ctx, l, func() ([]string, error) {
			c, _, err := l.conn.Children(n.dir)
			return c, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		paths = paths[:0]
		for _, name := range names {
			if strings.HasPrefix(name, n.prefix) {
				paths = append(paths, n.dir+"/"+name)
			}
		}
	}
	for _, p := range paths {
		_, err := call(ctx, l, func() (struct{}, error) { return struct{}{}, l.conn.Delete(p, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}

// release gives back what h holds or queued for, on a fresh bounded
// context, after a failed acquire.
func (l *Locker) release(h *held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		l.opt.Logger.Warn("lock release failed; its znodes are deleted once ZooKeeper answers",
			zap.String("owner", h.Owner.ID()), zap.Error(err))
	}
}
