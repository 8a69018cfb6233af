package etcdlock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// watchWounds follows this Locker's wound prefix for its lifetime and
// wounds the local owners named there.
func (l *Locker) watchWounds() {
	defer l.wg.Done()
	for l.ctx.Err() == nil {
		wch := l.cli.Watch(clientv3.WithRequireLeader(l.ctx), l.woundDir(l.id),
			clientv3.WithPrefix(), clientv3.WithFilterDelete())
		for resp := range wch {
			for _, ev := range resp.Events {
				l.woundLocal(woundedOwner(string(ev.Kv.Key)))
			}
		}
		select { // the watch ended (no leader, etcd down): start it again
		case <-l.ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// woundLocal marks the local owner with id wounded, failing its wait.
func (l *Locker) woundLocal(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owners.Wound(id)
}

// woundHolder wounds the holder kv of the key a waits for if it is a
// younger transaction. The wound key is attached to the holder's own lease,
// so it never outlives that holder's Locker.
func (a *attempt) woundHolder(ctx context.Context, kv *mvccpb.KeyValue) {
	e, err := parseEntry(kv.Value)
	if err != nil || e.Owner == a.h.Owner.ID() || e.olderThan(a.h.Owner.Priority(), a.h.Owner.ID()) {
		return
	}
	wk := a.l.woundKey(e.Locker, e.Owner)
	if a.wounds[wk] {
		return
	}
	a.wounds[wk] = true
	octx, cancel := a.l.opCtx(ctx)
	defer cancel()
	if _, err := a.l.cli.Put(octx, wk, a.h.Owner.ID(), clientv3.WithLease(clientv3.LeaseID(kv.Lease))); err != nil {
		a.l.opt.Logger.Debug("wound not written (the holder's session may be gone)",
			zap.String("holder", e.Owner), zap.Error(err))
	}
}

// begin registers an acquire in progress for owner on session s.
func (l *Locker) begin(owner lockmgr.Owner, s *session) (*held, *leasebook.OwnerState) {
	h := &held{Member: leasebook.Member{Owner: owner}, sess: s}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.owners.Ref(owner.ID())
	s.Join(&h.Member)
	return h, st
}

// forget drops h from its session and its owner's bookkeeping (once). It
// reports whether the owner's last reference went and it had been wounded:
// then the wound key should be deleted.
func (l *Locker) forget(h *held) (dropWound bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !h.Release(h.sess.Session) {
		return false
	}
	return l.owners.Unref(h.Owner.ID())
}
