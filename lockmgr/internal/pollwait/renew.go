package pollwait

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

var (
	errNotOurs = errors.New("pollwait: lock expired or taken over (renewal found another holder or none)")
	errRunOut  = errors.New("pollwait: lease validity ran out before a renewal succeeded")
)

// renewLoop renews every lease of the Engine in one Store call about every
// ttl/3, sooner after a failure, and loses leases whose validity runs out.
func (e *Engine) renewLoop() {
	defer e.wg.Done()
	e.book.Loop(e.ctx, e.cfg.TTL/3, e.renewAll, errRunOut, nil)
}

// renewAll renews every held key; false if the Store call failed.
func (e *Engine) renewAll() bool {
	rs := e.book.Renewals()
	if len(rs) == 0 {
		return true
	}
	items := make([]Held, len(rs))
	for i, r := range rs {
		items[i] = Held{Tok: r.H.Tok, Keys: keyNames(r.Keys), Fences: r.Fences, Owner: r.H.Owner, Valid: r.Valid}
	}
	ctx, cancel := e.renewCtx(rs)
	defer cancel()
	sent := time.Now()
	res, err := e.st.Renew(ctx, items)
	if err != nil {
		e.ledger.Metrics().ObserveRenewals(lockmgr.RenewError, len(items))
		if e.ctx.Err() == nil {
			e.cfg.Logger.Warn("lease renewal failed; leases stay valid until their deadline", zap.Error(err))
		}
		return false
	}
	until := sent.Add(Validity(e.cfg.TTL))
	for i, r := range rs {
		if i >= len(res) {
			break
		}
		e.renewed(r.H, len(r.Keys), res[i], until)
	}
	return true
}

// renewed applies one renewal result for the first n keys of h. Validity
// is extended only if no key was granted since (those were not renewed).
func (e *Engine) renewed(h *leasebook.Held, n int, r RenewResult, until time.Time) {
	switch r.State {
	case Lost:
		e.ledger.Metrics().ObserveRenewals(lockmgr.RenewLost, 1)
	case Unknown:
		e.ledger.Metrics().ObserveRenewals(lockmgr.RenewError, 1)
	default:
		e.ledger.Metrics().ObserveRenewals(lockmgr.RenewOK, 1)
	}
	if r.Restored && e.restoredAfterRelease(h) {
		return
	}
	if r.Wounded {
		e.book.MarkWounded(h.Owner)
	}
	switch r.State {
	case Lost:
		e.book.Lose(h, errNotOurs)
		return
	case Unknown:
		return
	}
	e.book.Renewed(h, n, until)
}

// restoredAfterRelease gives back keys a renewal restored if h was
// released meanwhile (the restore may have landed after the release), so
// no lock is left behind. It reports whether h was being released.
func (e *Engine) restoredAfterRelease(h *leasebook.Held) bool {
	releasing, keys, fences := e.book.Releasing(h)
	if !releasing {
		return false
	}
	ctx, cancel := e.freshCtx()
	defer cancel()
	if err := e.st.Release(ctx, h.Tok, keyNames(keys), fences); err != nil {
		e.cfg.Logger.Warn("could not give back a lock restored after its release; it expires with its ttl", zap.Error(err))
	}
	return true
}
