package redislock

import (
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

var (
	errNotOurs  = errors.New("redislock: lock expired or taken over (renewal found another holder or none)")
	errRunOut   = errors.New("redislock: lease validity ran out before a renewal succeeded")
	errRenewBad = errors.New("redislock: unexpected renew script reply")
)

// renewLoop renews every lease of the Locker in one pipeline about every
// ttl/3, sooner after a failure, and loses leases whose validity runs out.
func (l *Locker) renewLoop() {
	defer l.wg.Done()
	l.book.Loop(l.ctx, l.opt.TTL/3, l.renewAll, errRunOut, l.notify.sweep)
}

// renewAll renews every held key; false if the round trip failed.
func (l *Locker) renewAll() bool { return l.renew(l.book.Renewals()) }

// renewBefore renews h's keys, outside the rounds, halfway to until if h
// still holds them then: a grant a release made came with a short lease
// (grantLease), which a short transaction never needs to extend. A
// renewal whose call failed is tried again after a quarter of the time
// left, as long as some is left (the rounds come only every ttl/3).
func (l *Locker) renewBefore(h *leasebook.Held, until time.Time) {
	time.AfterFunc(time.Until(until)/2, func() {
		for !l.closed() {
			r, ok := l.book.RenewalOf(h)
			if !ok || l.renew([]leasebook.Renewal{r}) {
				return
			}
			left := time.Until(until)
			if left <= 0 {
				return
			}
			select {
			case <-time.After(left / 4):
			case <-l.ctx.Done():
				return
			}
		}
	})
}

// renew renews the keys of rs in one pipeline, each lease's in one call
// (renew_many.lua; one per key on a Cluster, whose keys hash apart);
// false if the round trip failed.
func (l *Locker) renew(rs []leasebook.Renewal) bool {
	type item struct {
		r       leasebook.Renewal
		locks   []string // the Redis lock keys of r.Keys
		restore string   // "1": the lease is valid, the server may have lost it
		cmds    []*redis.Cmd
	}
	if len(rs) == 0 {
		return true
	}
	items := make([]item, 0, len(rs))
	for _, r := range rs {
		it := item{r: r, restore: "0"}
		for _, k := range r.Keys {
			it.locks = append(it.locks, l.names(k.Name).lock)
		}
		if r.Valid {
			it.restore = "1"
		}
		items = append(items, it)
	}
	ctx, cancel := leasebook.RenewCtx(l.ctx, rs, l.opt.OpTimeout)
	defer cancel()
	sent := time.Now()
	_, cluster := l.rdb.(*redis.ClusterClient)
	_, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		var all []*redis.Cmd
		for i := range items {
			it := &items[i]
			h := it.r.H
			it.cmds = it.cmds[:0]
			if len(it.locks) > 1 && !cluster {
				for at := 0; at < len(it.locks); at += manyKeys {
					part := it.locks[at:min(at+manyKeys, len(it.locks))]
					args := []any{h.Tok, l.opt.TTL.Milliseconds(), it.restore, it.r.Owner.ID(), it.r.Prio, l.woundChannel()}
					for _, f := range it.r.Fences[at : at+len(part)] {
						args = append(args, f)
					}
					c := l.sc.renewMany.EvalSha(ctx, p, part, args...)
					it.cmds = append(it.cmds, c)
					all = append(all, c)
				}
				continue
			}
			for j, lk := range it.locks {
				c := l.sc.renew.EvalSha(ctx, p, []string{lk}, h.Tok, l.opt.TTL.Milliseconds(),
					it.restore, it.r.Owner.ID(), it.r.Prio, l.woundChannel(), it.r.Fences[j])
				it.cmds = append(it.cmds, c)
				all = append(all, c)
			}
		}
		return all
	})
	if err != nil && l.ctx.Err() == nil {
		l.opt.Logger.Warn("lease renewal failed; leases stay valid until their deadline", zap.Error(err))
	}
	until := sent.Add(leasebook.Validity(l.opt.TTL))
	for _, it := range items {
		l.renewed(it.r.H, len(it.r.Keys), it.cmds, until)
	}
	return err == nil
}

// renewed applies the replies of the renew calls for the first n keys of
// h. Validity is extended only if no key was granted since (those were not
// renewed by this round).
func (l *Locker) renewed(h *leasebook.Held, n int, cmds []*redis.Cmd, until time.Time) {
	m := l.ledger.Metrics()
	lost, wounded, restored := false, false, false
	for _, c := range renewReplies(n, cmds) {
		v, err := c.v, c.err
		switch {
		case err != nil:
			m.ObserveRenewals(lockmgr.RenewError, 1)
			return // unknown: validity keeps running down
		case v == 0:
			lost = true
		case v == 2:
			wounded = true
		case v == 3:
			restored = true
		case v != 1:
			m.ObserveRenewals(lockmgr.RenewError, 1)
			l.opt.Logger.Warn("renew", zap.Error(errRenewBad))
			return
		}
	}
	if lost {
		m.ObserveRenewals(lockmgr.RenewLost, 1)
	} else {
		m.ObserveRenewals(lockmgr.RenewOK, 1)
	}
	if restored && l.restoredAfterRelease(h) {
		return
	}
	if wounded {
		l.book.WoundToken(h.Tok)
	}
	if lost {
		l.book.Lose(h, errNotOurs)
		return
	}
	l.book.Renewed(h, n, until)
}

// restoredAfterRelease handles keys this renewal restored: logged, and
// deleted again if the lease was released meanwhile (the restore may have
// run after the release), so no lock is left behind.
func (l *Locker) restoredAfterRelease(h *leasebook.Held) bool {
	releasing, keys, _ := l.book.Releasing(h)
	if !releasing {
		owner, _ := l.book.OwnerOf(h)
		l.opt.Logger.Warn("Redis had lost a held lock (restart or failover); restored it while the lease was still valid",
			zap.String("owner", owner.ID()))
		return false
	}
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseKeys(ctx, h.Tok, keys, true, l.book.StaleTickets(h)...); err != nil {
		l.opt.Logger.Warn("could not delete a lock restored after its release; it expires with its ttl", zap.Error(err))
	}
	return true
}

// renewReply is one key's reply to a renewal: renew.lua's code, or why
// there is none.
type renewReply struct {
	v   int64
	err error
}

// renewReplies are the n keys' replies in cmds: one call per key, or of
// renew_many.lua, one per manyKeys keys.
func renewReplies(n int, cmds []*redis.Cmd) []renewReply {
	out := make([]renewReply, 0, n)
	for _, c := range cmds {
		if len(cmds) == n {
			v, err := c.Int64()
			out = append(out, renewReply{v: v, err: err})
			continue
		}
		vs, err := c.Int64Slice()
		if err != nil {
			return []renewReply{{err: err}}
		}
		for _, v := range vs {
			out = append(out, renewReply{v: v})
		}
	}
	if len(out) != n {
		return []renewReply{{err: errRenewBad}}
	}
	return out
}
