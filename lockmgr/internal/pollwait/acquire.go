package pollwait

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Acquire implements lockmgr.Locker.Acquire.
func (e *Engine) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (lease *lockmgr.Lease, err error) {
	start := time.Now()
	defer func() { e.ledger.Metrics().ObserveAcquire(keys, start, err) }()
	if e.closed() {
		return nil, lockmgr.ErrClosed
	}
	if keys, err = lockmgr.NormalizeKeys(keys); err != nil {
		return nil, err
	}
	h := e.begin(owner)
	fences := make([]uint64, 0, len(keys))
	for _, k := range keys {
		f, err := e.acquireKey(ctx, h, k)
		if err != nil {
			e.release(h)
			return nil, err
		}
		fences = append(fences, f)
	}
	e.mu.Lock()
	validUntil := h.validUntil
	e.mu.Unlock()
	lease, keeper := lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner: owner, Keys: keys, Fences: fences, ValidUntil: validUntil,
		Release: func(ctx context.Context) error { return e.releaseCtx(ctx, h) },
		Ledger:  e.ledger,
	})
	e.mu.Lock()
	lostErr := h.lost
	if lostErr == nil {
		h.keeper = keeper
		keeper.Extend(h.validUntil)
	}
	e.mu.Unlock()
	if lostErr != nil {
		ctx, cancel := e.freshCtx()
		defer cancel()
		_ = lease.Release(ctx)
		return nil, fmt.Errorf("%w: while acquiring: %w", lockmgr.ErrLeaseLost, lostErr)
	}
	return lease, nil
}

// begin registers an acquire in progress for owner with a fresh token.
func (e *Engine) begin(owner lockmgr.Owner) *held {
	h := &held{tok: e.token(owner), owner: owner}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.owners[owner]
	if st == nil {
		st = &ownerState{}
		e.owners[owner] = st
	}
	st.refs++
	e.held[h] = struct{}{}
	return h
}

// granted records that k was granted to h by a request sent at sent; it
// reports false (granting nothing) if the validity already ran out.
func (e *Engine) granted(h *held, k lockmgr.Key, fence uint64, sent time.Time) bool {
	until := sent.Add(Validity(e.cfg.TTL))
	if !time.Now().Before(until) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h.keys = append(h.keys, k)
	h.fences = append(h.fences, fence)
	if h.validUntil.IsZero() || until.Before(h.validUntil) {
		h.validUntil = until
	}
	return true
}

// releaseCtx is the lease's release: one Store call.
func (e *Engine) releaseCtx(ctx context.Context, h *held) error {
	e.mu.Lock()
	keys, fences := h.keys, h.fences
	h.releasing = true
	e.mu.Unlock()
	ctx, cancel := e.opCtx(ctx)
	defer cancel()
	var err error
	if len(keys) > 0 {
		err = e.st.Release(ctx, h.tok, keyNames(keys), fences)
	}
	e.forget(h)
	if err != nil {
		return fmt.Errorf("%s: release: %w", e.cfg.Name, err)
	}
	return nil
}

// release gives back what h holds after a failed acquire, on a fresh
// bounded context.
func (e *Engine) release(h *held) {
	ctx, cancel := e.freshCtx()
	defer cancel()
	if err := e.releaseCtx(ctx, h); err != nil {
		e.cfg.Logger.Warn("lock release failed; the lock expires with its lease",
			zap.String("owner", h.owner.ID()), zap.Error(err))
	}
}

// forget drops h from renewal and owner bookkeeping (once) and wakes the
// local waiters of its keys.
func (e *Engine) forget(h *held) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	delete(e.held, h)
	if st := e.owners[h.owner]; st != nil {
		st.refs--
		if st.refs == 0 {
			delete(e.owners, h.owner)
		}
	}
	for _, k := range h.keys {
		if g := e.gates[k.Name]; g != nil && len(g.queue) > 0 {
			g.queue[0].poke()
		}
	}
}

// ownerHeld lists what owner holds on this Engine (including keys granted
// so far to acquires in progress), and whether it is known wounded.
func (e *Engine) ownerHeld(o lockmgr.Owner) ([]Held, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.owners[o]; st != nil && st.wounded {
		return nil, true
	}
	var out []Held
	for h := range e.held {
		if h.owner == o && len(h.keys) > 0 {
			out = append(out, Held{Tok: h.tok, Keys: keyNames(h.keys)})
		}
	}
	return out, false
}

// markWounded records that owner o was wounded and wakes its wait.
func (e *Engine) markWounded(o lockmgr.Owner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.owners[o]; st != nil {
		st.wounded = true
		if st.waiting != nil {
			st.waiting.poke()
		}
	}
}
