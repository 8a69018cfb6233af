package zklock

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// ensureSetup creates Root, its locks and wound directories and this
// Locker's wound directory (persistent; Close removes the last).
func (l *Locker) ensureSetup(ctx context.Context) error {
	l.setupMu.Lock()
	defer l.setupMu.Unlock()
	if l.setup {
		return nil
	}
	for _, p := range []string{l.opt.Root, l.opt.Root + "/locks", l.opt.Root + "/wound", l.opt.Root + "/observe", l.woundDir(l.id)} {
		_, _, err := tracked(ctx, l, func() (string, error) {
			return l.conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	l.setup = true
	close(l.setupC)
	return nil
}

// watchWounds follows this Locker's wound directory: each znode there
// wounds a local owner and is deleted.
func (l *Locker) watchWounds() {
	defer l.wg.Done()
	select { // the directory is made by the first Acquire
	case <-l.setupC:
	case <-l.ctx.Done():
		return
	}
	for !l.closed() {
		type children struct {
			names []string
			ch    <-chan zk.Event
		}
		c, err := call(l.ctx, l, func() (children, error) {
			names, _, ch, err := l.conn.ChildrenW(l.woundDir(l.id))
			return children{names, ch}, err
		})
		if err != nil { // ZooKeeper away
			select {
			case <-l.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for _, name := range c.names {
			owner, uerr := url.PathUnescape(name)
			if uerr == nil {
				l.woundLocal(owner)
			}
			_, _ = call(l.ctx, l, func() (struct{}, error) {
				return struct{}{}, l.conn.Delete(l.woundDir(l.id)+"/"+name, -1)
			})
		}
		select {
		case <-l.ctx.Done():
		case <-c.ch:
		}
	}
}

// woundLocal marks the local owner with id wounded, failing its wait.
func (l *Locker) woundLocal(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owners.Wound(id)
}

// woundHolder wounds the holder n of the key a waits for if it is a
// younger transaction.
func (a *attempt) woundHolder(ctx context.Context, n node) {
	me := a.h.Owner
	if n.prio < me.Priority() || a.wounds[n.name] {
		return
	}
	data, _, err := tracked(ctx, a.l, func() ([]byte, error) {
		d, _, err := a.l.conn.Get(a.dir + "/" + n.name)
		return d, err
	})
	if err != nil {
		return // gone already, or ZooKeeper away: the next read tries again
	}
	e, err := parseEntry(data)
	if err != nil || e.Owner == me.ID() || e.olderThan(me) {
		return
	}
	a.wounds[n.name] = true
	_, _, err = tracked(ctx, a.l, func() (string, error) {
		return a.l.conn.Create(a.l.woundPath(e.Locker, e.Owner), []byte(me.ID()), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		a.l.opt.Logger.Debug("wound not written", zap.String("holder", e.Owner), zap.Error(err))
	}
}

// begin registers an acquire in progress for owner.
func (l *Locker) begin(owner lockmgr.Owner) (*held, *leasebook.OwnerState) {
	h := &held{Member: leasebook.Member{Owner: owner}}
	l.mu.Lock()
	defer l.mu.Unlock()
	return h, l.owners.Ref(owner.ID())
}

// join makes s the session of h (at its first znode); false if h already
// runs in another session, whose znodes are then gone.
func (l *Locker) join(h *held, s *session) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.sess == nil {
		h.sess = s
		s.Join(&h.Member)
	}
	return h.sess == s
}

// forget drops h from its session and its owner's bookkeeping (once).
func (l *Locker) forget(h *held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s *leasebook.Session
	if h.sess != nil {
		s = h.sess.Session
	}
	if h.Release(s) {
		l.owners.Unref(h.Owner.ID())
	}
}
