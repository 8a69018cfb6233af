package redislock

import (
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
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
	interval := l.opt.TTL / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		next := interval
		if !l.renewAll() {
			next = interval / 4
		}
		if d := l.expireOverdue(); d > 0 && d < next {
			next = d
		}
		l.notify.sweep()
		t.Reset(next)
	}
}

// renewAll renews every held key; false if the round trip failed.
func (l *Locker) renewAll() bool {
	type item struct {
		h       *held
		n       int      // keys renewed
		locks   []string // their Redis lock keys
		fences  []uint64
		restore string // "1": the lease is valid, the server may have lost it
		cmds    []*redis.Cmd
	}
	now := time.Now()
	l.mu.Lock()
	items := make([]item, 0, len(l.held))
	for h := range l.held {
		if len(h.keys) == 0 || h.lost != nil {
			continue
		}
		it := item{h: h, n: len(h.keys), fences: slices.Clone(h.fences), restore: "0"}
		for _, k := range h.keys {
			it.locks = append(it.locks, l.names(k.Name).lock)
		}
		if now.Before(h.validUntil) {
			it.restore = "1"
		}
		items = append(items, it)
	}
	l.mu.Unlock()
	if len(items) == 0 {
		return true
	}
	ctx, cancel := l.opCtx(l.ctx)
	defer cancel()
	sent := time.Now()
	_, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		var all []*redis.Cmd
		for i := range items {
			it := &items[i]
			it.cmds = it.cmds[:0]
			for j, lk := range it.locks {
				c := l.sc.renew.EvalSha(ctx, p, []string{lk}, it.h.tok, l.opt.TTL.Milliseconds(),
					it.restore, it.h.owner.ID(), it.h.owner.Priority(), l.woundChannel(), it.fences[j])
				it.cmds = append(it.cmds, c)
				all = append(all, c)
			}
		}
		return all
	})
	if err != nil && l.ctx.Err() == nil {
		l.opt.Logger.Warn("lease renewal failed; leases stay valid until their deadline", zap.Error(err))
	}
	until := sent.Add(l.validity())
	for _, it := range items {
		l.renewed(it.h, it.n, it.cmds, until)
	}
	return err == nil
}

// renewed applies the replies of the renew calls for the first n keys of
// h. Validity is extended only if no key was granted since (those were not
// renewed by this round).
func (l *Locker) renewed(h *held, n int, cmds []*redis.Cmd, until time.Time) {
	lost, wounded, restored := false, false, false
	for _, c := range cmds {
		v, err := c.Int64()
		switch {
		case err != nil:
			return // unknown: validity keeps running down
		case v == 0:
			lost = true
		case v == 2:
			wounded = true
		case v == 3:
			restored = true
		case v != 1:
			l.opt.Logger.Warn("renew", zap.Error(errRenewBad))
			return
		}
	}
	if restored && l.restoredAfterRelease(h) {
		return
	}
	if wounded {
		l.wound(h.tok)
	}
	if lost {
		l.lose(h, errNotOurs)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.lost == nil && !h.released && len(h.keys) == n {
		h.validUntil = until
		if h.keeper != nil {
			h.keeper.Extend(until)
		}
	}
}

// restoredAfterRelease handles keys this renewal restored: logged, and
// deleted again if the lease was released meanwhile (the restore may have
// run after the release), so no lock is left behind.
func (l *Locker) restoredAfterRelease(h *held) bool {
	l.mu.Lock()
	releasing, keys := h.releasing, h.keys
	l.mu.Unlock()
	if !releasing {
		l.opt.Logger.Warn("Redis had lost a held lock (restart or failover); restored it while the lease was still valid",
			zap.String("owner", h.owner.ID()))
		return false
	}
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseKeys(ctx, h.tok, keys); err != nil {
		l.opt.Logger.Warn("could not delete a lock restored after its release; it expires with its ttl", zap.Error(err))
	}
	return true
}

// lose marks h lost: no more renewals; its lease (if granted) ends with
// ErrLeaseLost. Its keys are released when the lease is.
func (l *Locker) lose(h *held, cause error) {
	l.mu.Lock()
	if h.lost != nil || h.released {
		l.mu.Unlock()
		return
	}
	h.lost = cause
	keeper := h.keeper
	l.mu.Unlock()
	if keeper != nil && keeper.Lose(cause) {
		l.opt.Logger.Warn("lock lease lost", zap.String("owner", h.owner.ID()), zap.Error(cause))
	}
}

// expireOverdue loses leases whose validity has run out and returns the
// time until the next one runs out (0 if none).
func (l *Locker) expireOverdue() time.Duration {
	now := time.Now()
	var overdue []*held
	var next time.Duration
	l.mu.Lock()
	for h := range l.held {
		if h.validUntil.IsZero() || h.lost != nil {
			continue
		}
		if d := h.validUntil.Sub(now); d <= 0 {
			overdue = append(overdue, h)
		} else if next == 0 || d < next {
			next = d
		}
	}
	l.mu.Unlock()
	for _, h := range overdue {
		l.lose(h, errRunOut)
	}
	return next
}
