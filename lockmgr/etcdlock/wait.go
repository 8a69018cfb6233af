package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// attempt is the state of one Acquire's wait for one key.
type attempt struct {
	l        *Locker
	h        *held
	st       *leasebook.OwnerState
	k        lockmgr.Key
	dir      string
	path     string
	rev      int64                      // create revision of the own entry: the fence
	wounds   map[string]bool            // wound keys written
	seen     map[clientv3.LeaseID]int64 // leases of entries seen ahead -> their ttl (ms)
	waitDone *lockmgr.Waiting
	freed    time.Time // when the entry ahead went away (hand-off clock)
	holder   string    // owner of the first entry, last read
}

// queue is one read of a key's entries.
type queue struct {
	ahead   []*mvccpb.KeyValue // entries before the own one, oldest first
	mine    bool               // the own entry exists
	wounded bool               // the owner's wound key exists
	rev     int64              // revision of the read
}

// acquireKey takes key k for h, waiting as long as ctx allows. Its entry
// is recorded in h before it is written, so a failed acquire deletes it.
func (l *Locker) acquireKey(ctx context.Context, h *held, st *leasebook.OwnerState, k lockmgr.Key) (uint64, error) {
	a := &attempt{l: l, h: h, st: st, k: k, dir: l.dir(k.Name),
		wounds: map[string]bool{}, seen: map[clientv3.LeaseID]int64{}}
	a.path = a.dir + fmt.Sprintf("%x-%d", int64(h.sess.id), l.seq.Add(1))
	l.mu.Lock()
	h.paths = append(h.paths, a.path)
	l.mu.Unlock()
	defer func() { a.waitDone.End() }()
	q, err := a.enqueue(ctx)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) { // before the keep-alive noticed
		l.loseSession(h.sess, errLeaseGone)
	}
	for ; err == nil; q, err = a.read(ctx) {
		if !q.mine {
			return 0, fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, k.Rule, k.Name, errEntryGone)
		}
		if len(q.ahead) == 0 {
			if err := a.settle(ctx); err != nil {
				return 0, err
			}
			l.mu.Lock()
			h.keys = append(h.keys, k)
			l.mu.Unlock()
			a.waitDone.Granted(a.freed)
			return uint64(a.rev), nil
		}
		a.freed = time.Time{}
		if e, err := parseEntry(q.ahead[0].Value); err == nil {
			a.holder = e.Owner
			lockmgr.TraceHolder(ctx, e.Owner)
		}
		if q.wounded || st.IsWounded() {
			return 0, deadlockErr(h.Owner, k)
		}
		a.woundHolder(ctx, q.ahead[0])
		if err := a.wait(ctx, q); err != nil {
			return 0, err
		}
	}
	return 0, classify(ctx, k, l.away(ctx, err))
}

// enqueue puts the own entry and reads the queue in one transaction.
func (a *attempt) enqueue(ctx context.Context) (queue, error) {
	l := a.l
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	val := newEntry(a.h.Owner, l.id, a.h.sess.ttl.Milliseconds())
	resp, err := l.cli.Txn(octx).Then(
		clientv3.OpPut(a.path, val, clientv3.WithLease(a.h.sess.id)),
		clientv3.OpGet(a.dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(l.woundKey(l.id, a.h.Owner.ID())),
	).Commit()
	if err != nil {
		return queue{}, err
	}
	a.rev = resp.Header.Revision
	return a.parse(resp.Header.Revision, resp.Responses[1].GetResponseRange().Kvs,
		len(resp.Responses[2].GetResponseRange().Kvs) > 0), nil
}

// read reads the queue again.
func (a *attempt) read(ctx context.Context) (queue, error) {
	l := a.l
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	resp, err := l.cli.Txn(octx).Then(
		clientv3.OpGet(a.dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(l.woundKey(l.id, a.h.Owner.ID())),
	).Commit()
	if err != nil {
		return queue{}, err
	}
	return a.parse(resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs,
		len(resp.Responses[1].GetResponseRange().Kvs) > 0), nil
}

func (a *attempt) parse(rev int64, kvs []*mvccpb.KeyValue, wounded bool) queue {
	q := queue{rev: rev, wounded: wounded}
	for _, kv := range kvs {
		switch {
		case kv.CreateRevision < a.rev:
			q.ahead = append(q.ahead, kv)
			if e, err := parseEntry(kv.Value); err == nil {
				a.seen[clientv3.LeaseID(kv.Lease)] = e.TTLms
			}
		case kv.CreateRevision == a.rev && string(kv.Key) == a.path:
			q.mine = true
		}
	}
	return q
}

// wait sleeps until the entry just ahead is deleted (or, when a younger
// waiter is ahead, the holder: it may become a younger holder to wound),
// the owner is wounded, WaitSlice passes, or ctx, the session or the
// Locker ends.
func (a *attempt) wait(ctx context.Context, q queue) error {
	l := a.l
	if a.waitDone == nil {
		// etcd queues every waiter of every instance: the entries ahead
		// less the holder, and this one.
		a.waitDone = l.ledger.WaitQueued(a.h.Owner, a.k, len(q.ahead))
	}
	a.waitDone.Saw(a.holder, len(q.ahead)) // the holder is ahead too
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	predC, err := a.watch(ctx, wctx, q.ahead[len(q.ahead)-1])
	if err != nil || predC == nil {
		return err
	}
	var headC clientv3.WatchChan
	if len(q.ahead) > 1 && a.youngerWaiterAhead(q) {
		if headC, err = a.watch(ctx, wctx, q.ahead[0]); err != nil || headC == nil {
			return err
		}
	}
	t := time.NewTimer(l.opt.WaitSlice)
	defer t.Stop()
	select {
	case <-predC:
		a.freed = time.Now()
	case <-headC:
		a.freed = time.Now()
	case <-t.C:
	case <-a.st.Wounded(): // fail only if a re-read shows we must still wait
	case <-ctx.Done():
		return lockmgr.WaitError(ctx, a.k)
	case <-l.ctx.Done():
		return lockmgr.ErrClosed
	case <-a.h.sess.Done():
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, a.k.Rule, a.k.Name, errLeaseGone)
	}
	return nil
}

// watch watches kv's key for its deletion and returns the watch once etcd
// confirmed it and kv was seen to exist after that; nil (read again) if kv
// is gone or the watch failed. The watch starts at the current revision:
// one that starts at an older revision is served by etcd's catch-up loop,
// up to 100ms late.
func (a *attempt) watch(ctx, wctx context.Context, kv *mvccpb.KeyValue) (clientv3.WatchChan, error) {
	l := a.l
	key := string(kv.Key)
	wc := l.cli.Watch(wctx, key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	t := time.NewTimer(l.opt.OpTimeout)
	defer t.Stop()
	select {
	case resp, ok := <-wc:
		if !ok || resp.Err() != nil || !resp.Created {
			return nil, nil
		}
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, lockmgr.WaitError(ctx, a.k)
	case <-l.ctx.Done():
		return nil, lockmgr.ErrClosed
	}
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	resp, err := l.cli.Get(octx, key, clientv3.WithCountOnly())
	if err != nil {
		return nil, classify(ctx, a.k, l.away(ctx, err))
	}
	if resp.Count == 0 {
		return nil, nil
	}
	return wc, nil
}

// youngerWaiterAhead reports whether a waiter (not the holder) ahead is a
// younger transaction.
func (a *attempt) youngerWaiterAhead(q queue) bool {
	for _, kv := range q.ahead[1:] {
		if e, err := parseEntry(kv.Value); err == nil && !e.olderThan(a.h.Owner.Priority(), a.h.Owner.ID()) {
			return true
		}
	}
	return false
}

// settle runs when the own entry became first. If entries that were ahead
// vanished with their lease (expired or revoked, not released), their
// holder may still believe its lease valid for up to its ttl: wait that
// long before taking the lock, so there are never two valid holders.
func (a *attempt) settle(ctx context.Context) error {
	var wait time.Duration
	for id, ttlMs := range a.seen {
		if id == a.h.sess.id {
			continue
		}
		alive, err := a.l.leaseAlive(ctx, id)
		if err != nil {
			return classify(ctx, a.k, a.l.away(ctx, err))
		}
		if d := time.Duration(ttlMs) * time.Millisecond; !alive && d > wait {
			wait = d
		}
	}
	if wait == 0 {
		return nil
	}
	a.l.opt.Logger.Info("lock holder's session vanished; waiting out its ttl before taking the lock",
		zap.String("key", a.k.Name), zap.Duration("wait", wait))
	if a.waitDone == nil {
		a.waitDone = a.l.ledger.Wait(a.h.Owner, a.k)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return lockmgr.WaitError(ctx, a.k)
	case <-a.l.ctx.Done():
		return lockmgr.ErrClosed
	case <-a.h.sess.Done():
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, a.k.Rule, a.k.Name, errLeaseGone)
	}
}
