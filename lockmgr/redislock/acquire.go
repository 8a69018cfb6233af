package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (lease *lockmgr.Lease, err error) {
	start := time.Now()
	defer func() { l.ledger.Metrics().ObserveAcquire(keys, start, err) }()
	if l.closed() {
		return nil, lockmgr.ErrClosed
	}
	if keys, err = lockmgr.NormalizeKeys(keys); err != nil {
		return nil, err
	}
	h := l.begin(owner)
	fences := make([]uint64, 0, len(keys))
	for _, k := range keys {
		f, err := l.acquireKey(ctx, h, k)
		if err != nil {
			l.release(h)
			return nil, err
		}
		fences = append(fences, f)
	}
	l.mu.Lock()
	validUntil := h.validUntil
	l.mu.Unlock()
	lease, keeper := lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner: owner, Keys: keys, Fences: fences, ValidUntil: validUntil,
		Release: func(ctx context.Context) error { return l.releaseCtx(ctx, h) },
		Ledger:  l.ledger,
	})
	// From here on renewal talks to the keeper; a loss before that is
	// reported as the error of this Acquire.
	l.mu.Lock()
	lostErr := h.lost
	if lostErr == nil {
		h.keeper = keeper
		keeper.Extend(h.validUntil)
	}
	l.mu.Unlock()
	if lostErr != nil {
		ctx, cancel := l.freshCtx()
		defer cancel()
		_ = lease.Release(ctx)
		return nil, fmt.Errorf("%w: while acquiring: %w", lockmgr.ErrLeaseLost, lostErr)
	}
	return lease, nil
}

// begin registers an acquire in progress for owner with a fresh token.
func (l *Locker) begin(owner lockmgr.Owner) *held {
	h := &held{tok: l.token(owner), owner: owner}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.owners[owner]
	if st == nil {
		st = &ownerState{}
		l.owners[owner] = st
	}
	st.refs++
	l.held[h] = struct{}{}
	l.toks[h.tok] = h
	return h
}

// granted records that key k of h was granted by a request sent at sent.
func (l *Locker) granted(h *held, k lockmgr.Key, fence uint64, sent time.Time) {
	until := sent.Add(l.validity())
	l.mu.Lock()
	defer l.mu.Unlock()
	h.keys = append(h.keys, k)
	h.fences = append(h.fences, fence)
	if h.validUntil.IsZero() || until.Before(h.validUntil) {
		h.validUntil = until
	}
}

// validity is how long after sending a grant or renewal the lock is known
// held: the ttl less a margin for clock drift between us and the server.
func (l *Locker) validity() time.Duration {
	return l.opt.TTL - l.opt.TTL/100 - 2*time.Millisecond
}

func (l *Locker) wounded(o lockmgr.Owner) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.owners[o]
	return st != nil && st.wounded
}

// wound marks the owner of token tok as a wound-wait victim and wakes its
// wait, if any. Unknown tokens (already released) are ignored.
func (l *Locker) wound(tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.toks[tok]
	if h == nil {
		return
	}
	if st := l.owners[h.owner]; st != nil {
		st.wounded = true
		if st.waiting != nil {
			st.waiting.poke()
		}
	}
}

func deadlockErr(o lockmgr.Owner, k lockmgr.Key) error {
	return fmt.Errorf("%w: owner %s was wounded by an older transaction, waiting for rule %q key %q",
		lockmgr.ErrDeadlock, o, k.Rule, k.Name)
}

// releaseCtx is the lease's release: one pipelined round trip.
func (l *Locker) releaseCtx(ctx context.Context, h *held) error {
	l.mu.Lock()
	keys := h.keys
	h.releasing = true
	l.mu.Unlock()
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	err := l.releaseKeys(ctx, h.tok, keys)
	l.forget(h)
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
func (l *Locker) release(h *held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		l.opt.Logger.Warn("lock release failed; the lock expires with its lease",
			zap.String("owner", h.owner.ID()), zap.Error(err))
	}
}

// forget drops h from renewal and owner bookkeeping (once) and wakes the
// local waiters of its keys.
func (l *Locker) forget(h *held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	delete(l.held, h)
	delete(l.toks, h.tok)
	if st := l.owners[h.owner]; st != nil {
		st.refs--
		if st.refs == 0 {
			delete(l.owners, h.owner)
		}
	}
	for _, k := range h.keys {
		if g := l.gates[k.Name]; g != nil && len(g.queue) > 0 {
			g.queue[0].poke()
		}
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
