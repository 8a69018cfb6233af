package pollwait

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
)

var (
	errNotOurs = errors.New("pollwait: lock expired or taken over (renewal found another holder or none)")
	errRunOut  = errors.New("pollwait: lease validity ran out before a renewal succeeded")
)

// renewLoop renews every lease of the Engine in one Store call about every
// ttl/3, sooner after a failure, and loses leases whose validity runs out.
func (e *Engine) renewLoop() {
	defer e.wg.Done()
	interval := e.cfg.TTL / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		next := interval
		if !e.renewAll() {
			next = interval / 4
		}
		if d := e.expireOverdue(); d > 0 && d < next {
			next = d
		}
		t.Reset(next)
	}
}

// renewAll renews every held key; false if the Store call failed.
func (e *Engine) renewAll() bool {
	now := time.Now()
	var hs []*held
	var items []Held
	var counts []int
	e.mu.Lock()
	for h := range e.held {
		if len(h.keys) == 0 || h.lost != nil {
			continue
		}
		hs = append(hs, h)
		items = append(items, Held{Tok: h.tok, Keys: keyNames(h.keys), Fences: slices.Clone(h.fences),
			Owner: h.owner, Valid: now.Before(h.validUntil)})
		counts = append(counts, len(h.keys))
	}
	e.mu.Unlock()
	if len(items) == 0 {
		return true
	}
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	sent := time.Now()
	res, err := e.st.Renew(ctx, items)
	if err != nil {
		if e.ctx.Err() == nil {
			e.cfg.Logger.Warn("lease renewal failed; leases stay valid until their deadline", zap.Error(err))
		}
		return false
	}
	until := sent.Add(Validity(e.cfg.TTL))
	for i, h := range hs {
		if i >= len(res) {
			break
		}
		e.renewed(h, counts[i], res[i], until)
	}
	return true
}

// renewed applies one renewal result for the first n keys of h. Validity
// is extended only if no key was granted since (those were not renewed).
func (e *Engine) renewed(h *held, n int, r RenewResult, until time.Time) {
	if r.Restored && e.restoredAfterRelease(h) {
		return
	}
	if r.Wounded {
		e.markWounded(h.owner)
	}
	switch r.State {
	case Lost:
		e.lose(h, errNotOurs)
		return
	case Unknown:
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.lost == nil && !h.released && len(h.keys) == n {
		h.validUntil = until
		if h.keeper != nil {
			h.keeper.Extend(until)
		}
	}
}

// lose marks h lost: no more renewals; its lease (if granted) ends with
// ErrLeaseLost. Its keys are released when the lease is.
func (e *Engine) lose(h *held, cause error) {
	e.mu.Lock()
	if h.lost != nil || h.released {
		e.mu.Unlock()
		return
	}
	h.lost = cause
	keeper := h.keeper
	e.mu.Unlock()
	if keeper != nil && keeper.Lose(cause) {
		e.cfg.Logger.Warn("lock lease lost", zap.String("owner", h.owner.ID()), zap.Error(cause))
	}
}

// expireOverdue loses leases whose validity has run out and returns the
// time until the next one runs out (0 if none).
func (e *Engine) expireOverdue() time.Duration {
	now := time.Now()
	var overdue []*held
	var next time.Duration
	e.mu.Lock()
	for h := range e.held {
		if h.validUntil.IsZero() || h.lost != nil {
			continue
		}
		if d := h.validUntil.Sub(now); d <= 0 {
			overdue = append(overdue, h)
		} else if next == 0 || d < next {
			next = d
		}
	}
	e.mu.Unlock()
	for _, h := range overdue {
		e.lose(h, errRunOut)
	}
	return next
}

// restoredAfterRelease gives back keys a renewal restored if h was
// released meanwhile (the restore may have landed after the release), so
// no lock is left behind. It reports whether h was being released.
func (e *Engine) restoredAfterRelease(h *held) bool {
	e.mu.Lock()
	releasing, keys, fences := h.releasing, h.keys, h.fences
	e.mu.Unlock()
	if !releasing {
		return false
	}
	ctx, cancel := e.freshCtx()
	defer cancel()
	if err := e.st.Release(ctx, h.tok, keyNames(keys), fences); err != nil {
		e.cfg.Logger.Warn("could not give back a lock restored after its release; it expires with its ttl", zap.Error(err))
	}
	return true
}
