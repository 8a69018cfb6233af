package pollwait

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker.Acquire.
func (e *Engine) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(e.ledger, e.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		h := e.book.Begin(e.token(owner), owner)
		fences, err := leasebook.TakeAll(keys,
			func(k lockmgr.Key) (uint64, error) { return e.acquireKey(ctx, h, k) }, func() { e.release(h) })
		if err != nil {
			return nil, err
		}
		return e.book.Attach(h, keys, fences, e.ledger,
			func(ctx context.Context) error { return e.releaseCtx(ctx, h) }, e.freshCtx, nil, nil)
	})
}

// granted records that k was granted to h by a request sent at sent; it
// reports false (granting nothing) if the validity already ran out.
func (e *Engine) granted(h *leasebook.Held, k lockmgr.Key, fence uint64, sent time.Time) bool {
	until := sent.Add(Validity(e.cfg.TTL))
	if !time.Now().Before(until) {
		return false
	}
	e.book.Granted(h, k, fence, until)
	return true
}

// releaseCtx is the lease's release: one Store call.
func (e *Engine) releaseCtx(ctx context.Context, h *leasebook.Held) error {
	keys, fences := e.book.StartRelease(h)
	ctx, cancel := e.opCtx(ctx)
	defer cancel()
	var err error
	if len(keys) > 0 {
		err = e.st.Release(ctx, h.Tok, keyNames(keys), fences)
	}
	e.book.Forget(h)
	if err != nil {
		return fmt.Errorf("%s: release: %w", e.cfg.Name, err)
	}
	return nil
}

// release gives back what h holds after a failed acquire, on a fresh
// bounded context.
func (e *Engine) release(h *leasebook.Held) {
	ctx, cancel := e.freshCtx()
	defer cancel()
	if err := e.releaseCtx(ctx, h); err != nil {
		e.cfg.Logger.Warn("lock release failed; the lock expires with its lease",
			zap.String("owner", h.Owner.ID()), zap.Error(err))
	}
}

// ownerHeld lists what owner holds on this Engine (including keys granted
// so far to acquires in progress), and whether it is known wounded.
func (e *Engine) ownerHeld(o lockmgr.Owner) ([]Held, bool) {
	hs, wounded := e.book.OwnerHeld(o)
	if wounded {
		return nil, true
	}
	var out []Held
	for _, h := range hs {
		out = append(out, Held{Tok: h.Tok, Keys: keyNames(h.Keys)})
	}
	return out, false
}
