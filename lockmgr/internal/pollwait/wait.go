package pollwait

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// attempt is one Acquire's wait for one key.
type attempt struct {
	e        *Engine
	h        *leasebook.Held
	k        lockmgr.Key
	w        *leasebook.Waiter
	queued   bool      // a ticket or an unseen grant may be in the Store
	tried    bool      // a Try missed, so a ticket may be queued
	ticketed time.Time // last Queue of a waiter behind the local head
	waitDone *lockmgr.Waiting
	start    time.Time
	backoff  time.Duration
	holder   string
}

// acquireKey takes k for h, waiting as long as ctx allows. On error
// nothing of k is left in the Store.
func (e *Engine) acquireKey(ctx context.Context, h *leasebook.Held, k lockmgr.Key) (uint64, error) {
	a := &attempt{e: e, h: h, k: k, w: e.book.Join(k.Name, h.Owner, h.Tok), start: time.Now(), backoff: e.cfg.MinPoll}
	var err error
	defer func() { a.end(err) }()
	for {
		if !e.book.IsHead(k.Name, a.w) {
			a.queue(ctx)
			if err = a.sleep(ctx, e.cfg.TicketTTL()/4); err != nil {
				return 0, err
			}
			continue
		}
		freed := e.book.TakeFreed(a.w)
		sent := time.Now()
		var r Result
		if r, err = a.try(ctx); err != nil {
			err = a.fail(err)
			return 0, err
		}
		if r.Status == Granted {
			if e.granted(h, k, r.Fence, sent) {
				a.queued = false
				a.waitDone.Granted(leasebook.Earliest(freed, e.book.TakeFreed(a.w)))
				return r.Fence, nil
			}
			a.undo() // granted too late to be of use: give it back, try again
			continue
		}
		if r.Holder != "" {
			a.holder = r.Holder
			lockmgr.TraceHolder(ctx, r.Holder)
		}
		a.waitDone.Saw(a.holder, 0)
		if err = a.afterMiss(ctx, r); err != nil {
			return 0, err
		}
	}
}

// queue queues or refreshes the ticket of a waiter that is not the local
// head, at most every TicketTTL/4. The ticket only keeps the waiter's place
// among other Engines' waiters, so a failure is not fatal: the head's own
// tries report an unreachable service.
func (a *attempt) queue(ctx context.Context) {
	if time.Since(a.ticketed) < a.e.cfg.TicketTTL()/4 {
		return
	}
	octx, cancel := a.e.opCtx(ctx)
	defer cancel()
	a.queued, a.tried = true, true
	a.ticketed = time.Now()
	if err := a.e.st.Queue(octx, a.req()); err != nil && ctx.Err() == nil {
		a.e.cfg.Logger.Debug("queueing a waiter's ticket failed; it keeps its local place",
			zap.String("key", a.k.Name), zap.Error(err))
	}
}

// try runs Store.Try bounded by OpTimeout and classifies its error. A
// call that failed for want of the service is tried once more while ctx
// allows (a slow connect under load is not an outage); Try is idempotent
// for one token.
func (a *attempt) try(ctx context.Context) (Result, error) {
	r, err := a.tryOnce(ctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, lockmgr.ErrUnavailable) {
		r, err = a.tryOnce(ctx)
	}
	return r, err
}

func (a *attempt) tryOnce(ctx context.Context) (Result, error) {
	octx, cancel := a.e.opCtx(ctx)
	defer cancel()
	a.queued = true
	r, err := a.e.st.Try(octx, a.req())
	a.tried = a.tried || err != nil || r.Status != Granted
	if err != nil {
		return r, a.e.classify(ctx, a.k, err)
	}
	return r, nil
}

func (a *attempt) req() Request {
	return Request{Key: a.k.Name, Tok: a.h.Tok, Owner: a.h.Owner, Ticketed: a.tried}
}

// classify turns a Store error on a call made under ctx into the error
// Acquire returns.
func (e *Engine) classify(ctx context.Context, k lockmgr.Key, err error) error {
	switch {
	case ctx.Err() != nil || deadlinePassed(ctx):
		// The servers' calls share ctx's deadline; their timers may fire
		// an instant before ctx reports it. Either way the wait is over.
		<-ctx.Done()
		return lockmgr.WaitError(ctx, k)
	case errors.Is(err, lockmgr.ErrUnavailable):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return errors.Join(lockmgr.ErrUnavailable, err)
	}
	return err
}

// afterMiss fails a wounded owner, or sleeps before the next try.
func (a *attempt) afterMiss(ctx context.Context, r Result) error {
	if err := a.checkWounded(ctx); err != nil {
		return err
	}
	d := a.backoff/2 + rand.N(a.backoff/2+1)
	a.backoff = min(2*a.backoff, a.e.cfg.MaxPoll)
	if r.Status == Busy && r.Remaining > 0 && r.Remaining < d {
		d = r.Remaining + time.Millisecond
	}
	return a.sleep(ctx, d)
}

// checkWounded fails the wait with ErrDeadlock if an older transaction
// wounded this owner (wound-wait): known locally, or marked on a key it
// holds on this Engine. An owner that holds nothing here cannot be wounded.
func (a *attempt) checkWounded(ctx context.Context) error {
	held, wounded := a.e.ownerHeld(a.h.Owner)
	if !wounded && len(held) > 0 {
		octx, cancel := a.e.opCtx(ctx)
		var err error
		wounded, err = a.e.st.Wounded(octx, held)
		cancel()
		if err != nil && ctx.Err() == nil {
			a.e.cfg.Logger.Debug("wounded check failed; trying again at the next poll", zap.Error(err))
		}
		if wounded {
			a.e.book.MarkWounded(a.h.Owner)
		}
	}
	if wounded {
		return a.fail(leasebook.DeadlockErr(a.h.Owner, a.k))
	}
	return nil
}

// sleep waits for a poke, d (d < 0: no timer), the end of ctx, or Close.
func (a *attempt) sleep(ctx context.Context, d time.Duration) error {
	if a.waitDone == nil {
		a.waitDone = a.e.ledger.Wait(a.h.Owner, a.k)
		a.waitDone.Saw(a.holder, 0)
		a.waitDone.Live(func() (string, int) { return "", a.e.book.Index(a.k.Name, a.w) + 1 })
	}
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-a.w.Wake():
		a.backoff = a.e.cfg.MinPoll
	case <-timer:
	case <-ctx.Done():
		return a.fail(lockmgr.WaitError(ctx, a.k))
	case <-a.e.ctx.Done():
		return a.fail(lockmgr.ErrClosed)
	}
	if _, wounded := a.e.ownerHeld(a.h.Owner); wounded {
		return a.fail(leasebook.DeadlockErr(a.h.Owner, a.k))
	}
	return nil
}

// undo drops the ticket and gives back any grant (too late, or made in a
// reply never read), keeping nothing.
func (a *attempt) undo() {
	ctx, cancel := a.e.freshCtx()
	defer cancel()
	if err := a.e.st.Leave(ctx, a.req()); err != nil {
		a.e.cfg.Logger.Warn("cleanup after a failed or late try failed; the ticket or lock expires on its own",
			zap.String("key", a.k.Name), zap.Error(err))
	}
	a.queued = false
}

// fail cleans up after a failed wait: compare-and-release the key (the
// service may have granted it in a reply never read) and drop the ticket,
// on a fresh bounded context. It returns err.
func (a *attempt) fail(err error) error {
	if a.queued {
		a.undo()
	}
	return err
}

// end leaves the local queue and the ledger, and logs a slow wait.
func (a *attempt) end(err error) {
	if waited := time.Since(a.start); a.waitDone != nil && waited >= a.e.cfg.SlowWait {
		a.e.cfg.Logger.Info("slow lock wait", zap.String("rule", a.k.Rule), zap.String("key", a.k.Name),
			zap.String("waiter", a.h.Owner.ID()), zap.String("holder", a.holder),
			zap.Duration("waited", waited), zap.Error(err))
	}
	a.e.book.Leave(a.k.Name, a.w)
	a.waitDone.End()
}

// deadlinePassed reports whether ctx's deadline is reached, even if its
// own timer has not fired yet.
func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
