package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// try is one run of the acquire script.
type try struct {
	status int64 // 1 granted, 0 held by another, 2 free but not our turn
	fence  uint64
	pttl   time.Duration // holder's remaining lease when held
	holder string        // holder's owner id when held
	queued int           // length of the key's wait queue in Redis when not granted
	rank   int           // our 0-based place in that queue, -1 if not in it
	// mark, when not granted, is the larger of the key's fence counter and
	// the server's time in µs: a grant made after this try has a higher
	// fence.
	mark uint64
}

// attempt is the state of one Acquire's wait for one key.
type attempt struct {
	l        *Locker
	ctx      context.Context // the caller's: bounds the wait for a cleanup
	h        *leasebook.Held
	k        lockmgr.Key
	n        names
	w        *leasebook.Waiter
	queued   bool // a ticket (or an unseen grant) may be in Redis
	sub      bool // subscribed to the key's wake-up channel
	waitDone *lockmgr.Waiting
	start    time.Time
	asked    time.Time    // when the acquire script was last sent
	holder   string       // last holder seen, for the slow-wait log
	inQueue  int          // the key's queue in Redis at the last miss (0: unknown)
	rank     atomic.Int64 // our place in it at the last miss (-1: unknown); read by Snapshot
	// miss is the last try that did not grant the key: when it was sent,
	// the mark it saw, and the restart guard's dials before it. A grant
	// announced by a release is taken on its strength (usable).
	miss struct {
		sent  time.Time
		mark  uint64
		dials uint64
	}
}

// acquireKey takes key k for h, waiting as long as ctx allows. With
// handoff, the wait may instead end with the lease of another owner of
// this Locker handed to it (returned as handed, with fence 0). On error
// nothing of k is left in Redis.
func (l *Locker) acquireKey(ctx context.Context, h *leasebook.Held, k lockmgr.Key, handoff bool) (fence uint64, handed *leasebook.Held, err error) {
	a := &attempt{l: l, ctx: ctx, h: h, k: k, n: l.names(k.Name), w: l.book.Join(k.Name, h.Owner, h.Tok), start: time.Now()}
	a.rank.Store(-1)
	if handoff {
		l.book.AcceptHandoffs(a.w)
	}
	defer func() { a.end(err) }()
	if l.batch.nheld.Load() > 0 {
		if holder, _, ok := l.book.LocalHolder(k.Name); ok && holder != h.Owner {
			// Its holder's release may be held for a ride (batcher.hold):
			// we would wait here for it, so it goes now.
			go l.batch.unhold()
		}
	}
	for {
		if hh := l.book.TakeHanded(a.w); hh != nil {
			a.waitDone.Granted(l.book.TakeFreed(a.w))
			l.ledger.Metrics().ObserveLocalHandoff(k.Rule)
			return 0, hh, nil
		}
		g, announced := l.book.TakeGrant(a.w)
		if announced {
			if until, ok := a.usable(g); ok {
				// A release in Redis granted us the key and said so: no
				// round trip. Its short lease is renewed to the TTL if
				// still held halfway.
				l.book.MarkContended(h)
				a.won(g.Fence, until, l.book.TakeFreed(a.w))
				l.ledger.Metrics().ObserveReleaseGrant(k.Rule)
				l.renewBefore(h, until)
				return g.Fence, nil, nil
			}
			// Not provably fresh: ask, and the acquire script answers
			// whether the key is ours.
		}
		if !announced && !l.book.IsHead(k.Name, a.w) {
			if err = a.sleep(ctx, -1); err != nil {
				return 0, nil, err
			}
			continue
		}
		if holder, prio, ok := l.book.LocalHolder(k.Name); !announced && ok && holder != h.Owner && (handoff || a.queued) {
			// Held here: wait for the local release or hand-off rather
			// than asking Redis. A wait that hand-offs may end needs no
			// ticket in Redis meanwhile (the key comes to it or goes back
			// to Redis, where it asks); another keeps its ticket queued
			// (fresh each WaitSlice), so it keeps its place among other
			// instances' waiters. Wound-wait as the acquire script would
			// do it.
			left := l.opt.WaitSlice
			if !handoff {
				left -= time.Since(a.asked)
			}
			if left > 0 && !(a.queued && l.book.TakeNextChanged(a.w)) {
				if leasebook.Older(h.Owner, l.book.Priority(h.Owner), holder, prio) {
					l.book.MarkWounded(holder)
				}
				if err = a.sleep(ctx, left); err != nil {
					return 0, nil, err
				}
				continue
			}
		}
		if wait := l.restart.remaining(); wait > 0 {
			if err = a.sleep(ctx, wait); err != nil {
				return 0, nil, err
			}
			continue
		}
		dials := l.restart.dials.Load()
		freed := l.book.TakeFreed(a.w)
		sent := time.Now()
		var r try
		if r, err = a.run(ctx, l.book, !announced && a.miss.sent.IsZero() && l.fastable(k)); err != nil {
			err = a.fail(classify(ctx, k, l.restart.away(ctx, err)))
			return 0, nil, err
		}
		if r.status == 1 {
			var ok bool
			if ok, err = a.checkRestart(ctx, dials); err != nil {
				err = a.fail(err)
				return 0, nil, err
			}
			if !ok {
				continue
			}
			// pttl is the lease left: all of it for a grant made by this
			// call, less for one a release made (short, and earlier).
			lease := min(l.opt.TTL, max(r.pttl, 0))
			if a.waitDone != nil || !a.miss.sent.IsZero() || announced {
				l.book.MarkContended(h)
			}
			a.won(r.fence, sent.Add(leasebook.Validity(lease)), freed)
			if lease < l.opt.TTL {
				l.renewBefore(h, sent.Add(leasebook.Validity(lease)))
			}
			return r.fence, nil, nil
		}
		a.miss.sent, a.miss.mark, a.miss.dials = sent, r.mark, dials
		if r.holder != "" {
			a.holder = ownerOf(r.holder)
			lockmgr.TraceHolder(ctx, a.holder)
		}
		a.inQueue = r.queued
		a.rank.Store(int64(r.rank))
		a.waitDone.Saw(a.holder, 0)
		if err = a.afterMiss(ctx, r); err != nil {
			return 0, nil, err
		}
	}
}

// won records the grant of the key with fence, known held until until:
// the wait is over.
func (a *attempt) won(fence uint64, until time.Time, freed time.Time) {
	l := a.l
	a.queued = false
	l.book.Granted(a.h, a.k, fence, until)
	a.waitDone.Granted(leasebook.Earliest(freed, l.book.TakeFreed(a.w)))
	if hh := l.book.TakeHanded(a.w); hh != nil {
		// Redis granted us the key, so the grant of the lease handed to
		// us meanwhile is gone (expired, or lost with a failover): it must
		// not pass on to anyone else here.
		l.book.Lose(hh, errNotOurs)
		l.release(hh)
	}
}

// usable decides whether a grant a release announced may be taken without
// asking Redis, and until when the key is then known held. It must have
// been made after our last miss (its fence is above the mark that miss
// saw: an announcement delayed from before it, by this server or one that
// a failover replaced, is not), so after that miss was sent: the lease it
// set, grantLease, runs from later than then. No connection may have been
// made since that miss (a restarted server may have forgotten leases), and
// the restart guard must not be holding grants back.
func (a *attempt) usable(g leasebook.Grant) (time.Time, bool) {
	l, m := a.l, a.miss
	if m.sent.IsZero() || g.Fence <= m.mark || g.Epoch != m.dials ||
		l.restart.dials.Load() != m.dials || l.restart.remaining() > 0 || l.evict.risk() != "" {
		return time.Time{}, false
	}
	until := m.sent.Add(leasebook.Validity(l.grantLease()))
	if time.Until(until) < l.grantLease()/4 {
		return time.Time{}, false // too little left to renew it in time
	}
	return until, true
}

// afterMiss decides what to do when the key was not granted: fail a
// wounded owner, subscribe and retry at once, or sleep until woken.
func (a *attempt) afterMiss(ctx context.Context, r try) error {
	if a.wounded() {
		return a.fail(leasebook.DeadlockErr(a.h.Owner, a.k))
	}
	if !a.sub {
		a.sub = true
		if err := a.l.notify.subscribe(ctx, a.n.channel, a.k.Name); err != nil {
			a.l.opt.Logger.Debug("wake-up subscription not confirmed; relying on the wait slice",
				zap.String("key", a.k.Name), zap.Error(err))
		}
		return nil // retry now: a release before the subscription is not missed
	}
	wait := a.l.opt.WaitSlice
	switch {
	case r.status == 0 && r.pttl > 0 && r.pttl < wait:
		wait = r.pttl
	case r.status == 2:
		wait /= 4
	}
	return a.sleep(ctx, wait)
}

// sleep waits for a wake-up, d (d < 0: no timer), the end of ctx, or Close.
func (a *attempt) sleep(ctx context.Context, d time.Duration) error {
	if a.waitDone == nil {
		// Redis queues one head per instance: ours, and the others'
		// (each with its own local queue, which this count cannot see).
		depth := a.l.book.Waiting(a.k.Name) + max(a.inQueue-1, 0)
		a.waitDone = a.l.ledger.WaitQueued(a.h.Owner, a.k, depth)
		a.waitDone.Saw(a.holder, 0)
		a.waitDone.Live(func() (string, int) { return "", a.position() })
	}
	if a.wounded() {
		return a.fail(leasebook.DeadlockErr(a.h.Owner, a.k))
	}
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-a.w.Wake():
	case <-timer:
	case <-ctx.Done():
		return a.fail(lockmgr.WaitError(ctx, a.k))
	case <-a.l.ctx.Done():
		return a.fail(lockmgr.ErrClosed)
	}
	if a.wounded() {
		return a.fail(leasebook.DeadlockErr(a.h.Owner, a.k))
	}
	return nil
}

// wounded reports whether the wait must end because its owner was
// wounded: not when a lease was handed to it meanwhile or Redis announced
// a grant to it, which it takes (a wounded holder keeps what it holds
// until its next wait; the wound may have been meant for that grant).
func (a *attempt) wounded() bool {
	return a.l.book.Wounded(a.h.Owner) && !a.l.book.HasHanded(a.w) && !a.l.book.HasGrant(a.w)
}

// run sends the acquire script, bounded by OpTimeout. A call that failed
// for want of Redis is tried once more (a hiccup is not an outage) while
// ctx allows; the script is idempotent for our token. With fast, and no
// local waiter behind us, a SET NX (fast.go) is tried first, and the
// script only if it did not take the key.
func (a *attempt) run(ctx context.Context, book *leasebook.Book, fast bool) (try, error) {
	// Granted, the script also queues the ticket of our next local waiter,
	// so this instance keeps its place while that waiter is scheduled.
	next, nextTok, _ := book.NextInLine(a.k.Name, a.w)
	if fast && nextTok == "" {
		fence := fastFence()
		ok, err := twice(ctx, func() (bool, error) { return a.setNX(ctx, fence) })
		if err != nil {
			return try{}, err
		}
		if ok {
			// The fence reported is read after the reply: the key was
			// free when the SET ran, so every earlier grant's fence was
			// taken before this one.
			return try{status: 1, fence: fastFence(), pttl: a.l.opt.TTL, rank: -1}, nil
		}
	}
	v, err := twice(ctx, func() ([]interface{}, error) { return a.eval(ctx, next, nextTok) })
	if err != nil {
		return try{}, err
	}
	return parseTry(v)
}

// twice makes call, and once more if it failed for want of Redis while
// ctx allows: a hiccup is not an outage. A second call cut short by ctx
// reports the first one's failure, marked as Redis seen away (wentAway):
// the wait learned that the lock service did not answer, and its caller
// is told so rather than that the wait merely timed out.
func twice[T any](ctx context.Context, call func() (T, error)) (T, error) {
	v, err := call()
	if err == nil || ctx.Err() != nil || !unavailable(err) {
		return v, err
	}
	first := err
	if v, err = call(); err != nil && ctx.Err() != nil && !serverAway(err) {
		return v, wentAway{first}
	}
	return v, err
}

// setNX is the fast path's acquire (see fastSet), bounded by OpTimeout.
// It goes with the fast-path acquires other sessions make at the same
// moment (Locker.acquires, group commit as for releases: no wait when
// none is on its way), behind the releases held for a ride
// (batcher.carry). Pipelines use the client's
// one pool (ClientOptions): with a pool of their own, its first
// connections were dialled under load, and through a slow server (700 ms
// a reply) the grant checks a new connection calls for outlasted the
// statement's wait (TestLockServiceSlowerThanAFixedTimeout).
func (a *attempt) setNX(ctx context.Context, fence uint64) (bool, error) {
	l := a.l
	octx, cancel := l.batchCtx(ctx)
	defer cancel()
	a.queued, a.asked = true, time.Now()
	cmds, err := l.acquires.do(octx, func(p redis.Pipeliner) []*redis.Cmd {
		return []*redis.Cmd{l.fastSet(octx, p, a.n.lock, a.h.Tok, a.h.Owner.ID(), l.book.Priority(a.h.Owner), fence)}
	})
	if len(cmds) == 0 {
		return false, err // the wait ended first
	}
	return fastGranted(cmds[0])
}

func (a *attempt) eval(ctx context.Context, next lockmgr.Owner, nextTok string) ([]interface{}, error) {
	l := a.l
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	a.queued, a.asked = true, time.Now()
	// Our tickets may be granted by a release only while this Locker
	// hears the key's announcements: a grant nobody hears would hold the
	// key until its short lease ran out.
	hears := ""
	if l.notify.listening(a.n.channel) {
		hears = "1"
	}
	args := []any{a.h.Tok, a.h.Owner.ID(), l.book.Priority(a.h.Owner), l.opt.TTL.Milliseconds(),
		l.ticketTTL().Milliseconds(), l.woundChannel(), "1",
		l.opt.FenceTTL.Milliseconds(), nextTok, l.book.Priority(next), next.ID(), hears}
	if held := l.batch.take(); held != nil {
		c := l.batch.ride(octx, held, func(p redis.Pipeliner) []*redis.Cmd {
			return []*redis.Cmd{l.sc.acquire.EvalSha(octx, p, a.n.keys(), args...)}
		})
		if v, err := c[0].Slice(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return v, err
		}
		// The server lost its scripts: Run loads them.
	}
	return l.sc.acquire.Run(octx, l.rdb, a.n.keys(), args...).Slice()
}

// parseTry reads the acquire script's reply.
func parseTry(v []interface{}) (try, error) {
	var r try
	var pttl int64
	var ok [3]bool
	if len(v) >= 3 {
		r.status, ok[0] = v[0].(int64)
		var f int64
		f, ok[1] = v[1].(int64)
		r.fence = uint64(f)
		pttl, ok[2] = v[2].(int64)
	}
	if !ok[0] || !ok[1] || !ok[2] {
		return try{}, fmt.Errorf("redislock: acquire script returned %v", v)
	}
	r.pttl = time.Duration(pttl) * time.Millisecond
	r.rank = -1
	if len(v) >= 5 {
		r.holder, _ = v[3].(string)
		q, _ := v[4].(int64)
		r.queued = int(q)
	}
	if len(v) >= 6 {
		if rank, ok := v[5].(int64); ok {
			r.rank = int(rank)
		}
	}
	if len(v) >= 7 {
		c, _ := v[6].(int64)
		r.mark = uint64(c)
	}
	return r, nil
}

// ownerOf is the owner id in a lock hash's own field (which may carry
// more after a NUL byte).
func ownerOf(own string) string {
	if i := strings.IndexByte(own, 0); i >= 0 {
		return own[:i]
	}
	return own
}

// fail cleans up after a failed wait: compare-and-delete the key (the
// server may have granted it in a reply we never read) and leave its queue
// (where a local head may also have put our ticket), on a fresh bounded
// context, waited for no longer than the caller's wait allows
// (leasebook.CleanupWithin). It returns err.
func (a *attempt) fail(err error) error {
	if a.queued || a.l.book.Proxied(a.w) {
		a.queued = false
		leasebook.CleanupWithin(a.ctx, func() {
			ctx, cancel := a.l.freshCtx()
			defer cancel()
			// Through the batcher of acquires: a SET NX of this wait that
			// is still queued there, or on its way, reaches Redis first,
			// so the cleanup deletes what it may take instead of running
			// before it and leaving the key held until its TTL.
			if cerr := a.l.releaseKeysIn(ctx, &a.l.acquires, a.h.Tok, []lockmgr.Key{a.k}, true, nil); cerr != nil {
				a.l.opt.Logger.Warn("cleanup after a failed lock wait failed; the ticket or lock expires on its own",
					zap.String("key", a.k.Name), zap.Error(cerr))
			}
		})
	}
	return err
}

// end leaves the local queue, the subscription and the ledger, and logs a
// wait longer than SlowWait with the holder last seen.
func (a *attempt) end(err error) {
	if waited := time.Since(a.start); a.waitDone != nil && waited >= a.l.opt.SlowWait {
		a.l.opt.Logger.Info("slow lock wait", zap.String("rule", a.k.Rule), zap.String("key", a.k.Name),
			zap.String("waiter", a.h.Owner.ID()), zap.String("holder", a.holder),
			zap.Duration("waited", waited), zap.Error(err))
	}
	a.l.book.Leave(a.k.Name, a.w)
	if hh := a.l.book.TakeHanded(a.w); hh != nil {
		a.l.release(hh) // handed to a wait that failed: pass it on
	}
	if a.sub {
		a.l.notify.unsubscribe(a.n.channel)
	}
	a.waitDone.End()
}

// position is the attempt's place in the key's queue as far as this
// instance knows (1: next): its place among the local waiters, and for
// the local head its place among the instances' heads queued in Redis.
func (a *attempt) position() int {
	i := a.l.book.Index(a.k.Name, a.w)
	switch {
	case i < 0:
		return 0
	case i == 0 && a.rank.Load() >= 0:
		return int(a.rank.Load()) + 1
	}
	return i + 1
}
