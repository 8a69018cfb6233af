package leasebook

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Validity is how long after sending a grant or renewal a lock of lease
// ttl is known held on this process's monotonic clock: the ttl less a drift
// margin of 1% of the ttl plus 2ms.
func Validity(ttl time.Duration) time.Duration {
	return ttl - ttl/100 - 2*time.Millisecond
}

// Loop runs a renewal loop until ctx ends: about every interval it calls
// round (which renews every lease; false when its call failed, then the
// next round comes interval/4 after it began), loses the leases whose
// validity ran out with cause runOut (the next round comes no later than
// the next deadline) and calls after, if not nil. Rounds are spaced from
// their starts: a slow service's round does not push the next one later
// (a round that took longer than the interval is followed at once).
func (b *Book) Loop(ctx context.Context, interval time.Duration, round func() bool, runOut error, after func()) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		next := interval
		if !round() {
			next = interval / 4
		}
		next = max(next-time.Since(start), 0)
		if d := b.ExpireOverdue(runOut); d > 0 && d < next {
			next = d
		}
		if after != nil {
			after()
		}
		t.Reset(next)
	}
}

// Renewal is one lease to renew in a round: a snapshot of its keys.
type Renewal struct {
	H *Held
	// Owner is whom H is held for, Prio the age it asks with (both change
	// when H is handed off).
	Owner  lockmgr.Owner
	Prio   int64
	Keys   []lockmgr.Key
	Fences []uint64
	// Valid: the lease is still within its validity, so the service may
	// restore keys it lost (restart, failover).
	Valid bool
	// ValidUntil is the lease's validity deadline when snapshotted.
	ValidUntil time.Time
}

// RenewCtx bounds one renewal call for rs: by the latest validity
// deadline among them, and by opTimeout only where that is later. A
// renewal may take as long as a lease it renews is still held: cut short
// at a fixed bound, a slow service would lose leases it was renewing.
func RenewCtx(parent context.Context, rs []Renewal, opTimeout time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(opTimeout)
	for _, r := range rs {
		if r.ValidUntil.After(deadline) {
			deadline = r.ValidUntil
		}
	}
	return context.WithDeadline(parent, deadline)
}

// Renewals snapshots every lease with granted keys that is not lost.
func (b *Book) Renewals() []Renewal {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Renewal, 0, len(b.held))
	for h := range b.held {
		if len(h.keys) == 0 || h.lost != nil {
			continue
		}
		out = append(out, Renewal{H: h, Owner: h.Owner, Prio: b.owners[h.Owner].priority(h.Owner),
			Keys: h.keys, Fences: slices.Clone(h.fences), Valid: now.Before(h.validUntil), ValidUntil: h.validUntil})
	}
	return out
}

// RenewalOf snapshots h alone, as Renewals would; false if it has no
// granted keys or is lost or released.
func (b *Book) RenewalOf(h *Held) (Renewal, bool) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[h]; !ok || len(h.keys) == 0 || h.lost != nil {
		return Renewal{}, false
	}
	return Renewal{H: h, Owner: h.Owner, Prio: b.owners[h.Owner].priority(h.Owner),
		Keys: slices.Clone(h.keys), Fences: slices.Clone(h.fences), Valid: now.Before(h.validUntil), ValidUntil: h.validUntil}, true
}

// Renewed extends the validity of h to until after a renewal of its first
// n keys succeeded, unless a key was granted since (that one was not
// renewed) or h is lost or released.
func (b *Book) Renewed(h *Held, n int, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.lost == nil && !h.released && len(h.keys) == n {
		h.validUntil = until
		if h.keeper != nil {
			h.keeper.Extend(until)
		}
	}
}

// Lose marks h lost: no more renewals; its lease (if granted) ends with
// ErrLeaseLost. Its keys are released when the lease is.
func (b *Book) Lose(h *Held, cause error) {
	b.mu.Lock()
	if h.lost != nil || h.released {
		b.mu.Unlock()
		return
	}
	h.lost = cause
	keeper, owner := h.keeper, h.Owner
	// Local waiters for its keys stop waiting for it and ask the service.
	now := time.Now()
	for _, k := range h.keys {
		b.freeHeadLocked(k.Name, now)
	}
	b.mu.Unlock()
	if keeper != nil && keeper.Lose(cause) {
		b.log.Warn("lock lease lost", zap.String("owner", owner.ID()), zap.Error(cause))
	}
}

// ExpireOverdue loses, with cause, leases whose validity has run out and
// returns the time until the next one runs out (0 if none).
func (b *Book) ExpireOverdue(cause error) time.Duration {
	now := time.Now()
	var overdue []*Held
	var next time.Duration
	b.mu.Lock()
	for h := range b.held {
		if h.validUntil.IsZero() || h.lost != nil {
			continue
		}
		if d := h.validUntil.Sub(now); d <= 0 {
			overdue = append(overdue, h)
		} else if next == 0 || d < next {
			next = d
		}
	}
	b.mu.Unlock()
	for _, h := range overdue {
		b.Lose(h, cause)
	}
	return next
}
