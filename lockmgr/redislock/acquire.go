package redislock

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker. With Options.MinReplicasAck, the
// grants are on that many replicas before the lease is returned.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	if l.opt.MinReplicasAck > 0 {
		return l.acquireAcked(ctx, owner, keys)
	}
	return l.acquire(ctx, owner, keys)
}

func (l *Locker) acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(l.ledger, l.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		handoff := l.opt.LocalHandoffs > 0 && len(keys) == 1 && !keys[0].NoHandoff
		if handoff {
			if hh := l.reclaim(owner, keys[0]); hh != nil {
				lease, err := l.attach(hh, keys, l.book.Fences(hh))
				if err == nil { // counted as handOver counts: once it passed
					l.ledger.Metrics().ObserveLocalHandoff(keys[0].Rule)
				}
				return lease, err
			}
		}
		h := l.book.Begin(l.token(owner), owner)
		var handed *leasebook.Held
		free := l.takeFree(ctx, h, keys) // the keys nobody contends: one round trip for all
		fences, err := leasebook.TakeAll(keys, func(k lockmgr.Key) (uint64, error) {
			if f, ok := free[k.Name]; ok {
				return f, nil
			}
			f, hh, err := l.acquireKey(ctx, h, k, handoff)
			handed = hh
			return f, err
		}, func() { leasebook.CleanupWithin(ctx, func() { l.release(h) }) })
		if err != nil {
			return nil, err
		}
		if handed != nil {
			// The lease another owner of this Locker released came to us:
			// our own acquire took nothing and is dropped.
			l.book.Drop(h)
			h, fences = handed, l.book.Fences(handed)
		}
		return l.attach(h, keys, fences)
	})
}

// attach makes the Lease of h: released by releaseCtx, handed over by
// handOver.
func (l *Locker) attach(h *leasebook.Held, keys []lockmgr.Key, fences []uint64) (*lockmgr.Lease, error) {
	return l.book.Attach(h, keys, fences, l.ledger,
		func(ctx context.Context) error { return l.releaseCtx(ctx, h) }, l.freshCtx,
		func(to lockmgr.Owner) (*lockmgr.Lease, bool) { return l.handOver(h, to) },
		func() bool { return l.handOffLocal(h) || l.holdRelease(h) })
}

// handOffLocal is the release of h when it needs no round trip: to the
// next local waiter, within the bounds of local hand-offs.
func (l *Locker) handOffLocal(h *leasebook.Held) bool {
	if l.evict.risk() != "" || !l.book.HandOff(h, l.opt.LocalHandoffs, l.opt.LocalHandoffWindow) {
		return false
	}
	// The new holder's goroutine is now runnable on this P: let it run
	// (and send the statement it waited to send) before the releasing
	// session goes on, so the key is not idle meanwhile.
	runtime.Gosched()
	return true
}

// handOver passes h to owner to of this Locker without Redis, within the
// bounds of local hand-offs (Options.LocalHandoffs, LocalHandoffWindow):
// Redis keeps the grant under h's token and first owner, as after a
// hand-off to a local waiter. Never while the server may evict lock keys.
//
// At those bounds, when nobody else has asked Redis for the key since it
// was granted (keep.lua), the instance keeps it for another turn: one
// round trip that extends the lock, where giving it back and taking it
// again took two, and a statement queued behind its own release.
func (l *Locker) handOver(h *leasebook.Held, to lockmgr.Owner) (*lockmgr.Lease, bool) {
	if l.evict.risk() != "" {
		return nil, false
	}
	limit, window := l.opt.LocalHandoffs, l.opt.LocalHandoffWindow
	if !l.book.HandOver(h, to, limit, window) &&
		(!l.book.TurnOver(h, limit, window) || !l.keepTurn(h) || !l.book.HandOver(h, to, limit, window)) {
		return nil, false
	}
	keys, fences := l.book.Keys(h)
	lease, err := l.attach(h, keys, fences)
	if err != nil {
		// Lost as it passed: Attach gave it back. The old lease's
		// release, which its holder still makes, finds nothing.
		return nil, false
	}
	l.ledger.Metrics().ObserveLocalHandoff(keys[0].Rule)
	return lease, true
}

// keepTurn asks Redis to extend h's one key when nobody else has asked
// for it, and on yes starts a new turn of hand-offs with it (as after a
// grant at the moment the request was sent).
func (l *Locker) keepTurn(h *leasebook.Held) bool {
	keys, _ := l.book.Keys(h)
	if len(keys) != 1 {
		return false
	}
	n := l.names(keys[0].Name)
	ctx, cancel := l.freshCtx()
	defer cancel()
	sent := time.Now()
	cmds, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		return []*redis.Cmd{l.sc.keep.EvalSha(ctx, p, []string{n.lock, n.queue}, h.Tok, l.opt.TTL.Milliseconds())}
	})
	if err != nil {
		return false
	}
	if v, err := cmds[0].Int64(); err != nil || v != 1 {
		return false
	}
	return l.book.NewTurn(h, sent, sent.Add(leasebook.Validity(l.opt.TTL)))
}

// releaseCtx is the lease's release: to the next local waiter when it may
// be handed off (no round trip), else one pipelined round trip. While the
// server may evict lock keys (evictGuard) nothing is handed on: the key
// goes back to Redis, which grants no more. With Options.ReleaseWindow,
// the release of a lease nobody else wanted is held (holdRelease).
func (l *Locker) releaseCtx(ctx context.Context, h *leasebook.Held) error {
	if l.handOffLocal(h) || l.holdRelease(h) {
		return nil
	}
	keys, _ := l.book.StartRelease(h)
	ctx, cancel := l.batchCtx(ctx)
	defer cancel()
	err := l.releaseKeys(ctx, h.Tok, keys, true, l.book.StaleTickets(h)...)
	l.book.Forget(h)
	if err != nil {
		if unavailable(err) {
			l.releaseLater(h.Tok, keys)
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("redislock: release: %w", err)
	}
	return nil
}

// holdRelease releases h without waiting for Redis when Options.ReleaseWindow
// allows (h's keys were free when asked for and never waited for): the
// release is held for the Locker's next acquire to carry (batcher.hold),
// and h's keys stay held here until Redis has it. False: nothing changed.
func (l *Locker) holdRelease(h *leasebook.Held) bool {
	if l.opt.ReleaseWindow <= 0 || l.closed() || !l.book.Uncontended(h) {
		return false
	}
	keys, _ := l.book.StartRelease(h)
	if len(keys) == 0 {
		l.book.Forget(h)
		return true
	}
	// Bounded as a release sent when the window ends would be.
	c := &batchCall{deadline: time.Now().Add(l.opt.ReleaseWindow + l.opt.OpTimeout), queue: l.releaseQueue(h.Tok, keys, true, nil), lease: h}
	c.after = func(cmds []*redis.Cmd, err error) {
		if aerr := l.afterRelease(keys, cmds); err == nil {
			err = aerr
		}
		l.book.Forget(h)
		if err != nil {
			owner, _ := l.book.OwnerOf(h)
			l.opt.Logger.Warn("lock release failed; it is sent again until Redis answers or the lease ends",
				zap.String("owner", owner.ID()), zap.Error(err))
			if unavailable(err) {
				l.releaseLater(h.Tok, keys)
			}
		}
	}
	l.batch.hold(c, l.opt.ReleaseWindow)
	if !l.book.Uncontended(h) {
		// Another Locker's waiter was announced (wanted) after the
		// check above but before the call was held: it goes now.
		go l.batch.unhold()
	}
	return true
}

// reclaim takes over, for owner, the lease on k whose release this
// Locker holds back unsent (holdRelease): a local hand-off from the
// release window instead of the release and a new grant in one round
// trip, when the key's next ask comes from this instance before anything
// sent the release. Nothing of the release reached Redis, so the lock
// there is still the lease's; Book.Reclaim keeps the bounds of local
// hand-offs and refuses a key anyone else is known to want (then the
// release is held again, or sent at once if the key became wanted, and
// the acquire asks Redis as before). Nil: not taken over.
func (l *Locker) reclaim(owner lockmgr.Owner, k lockmgr.Key) *leasebook.Held {
	if l.batch.nheld.Load() == 0 || l.evict.risk() != "" {
		return nil
	}
	h := l.book.ReleasingHolder(k)
	if h == nil {
		return nil
	}
	c := l.batch.reclaim(h)
	if c == nil {
		return nil
	}
	if !l.book.Reclaim(h, owner, l.opt.LocalHandoffs, l.opt.LocalHandoffWindow) {
		l.batch.hold(c, l.opt.ReleaseWindow)
		if l.closed() || !l.book.Uncontended(h) {
			go l.batch.unhold() // wanted meanwhile, or the Locker closes: it goes now
		}
		return nil
	}
	return h
}

// wanted is the news that an owner of another Locker waits for a key of
// the lease whose token is tok (acquire.lua's wound, or its word that a
// waiter queued): the lease's release goes to Redis at once, not held
// for a ride, and if it is held already, what is held is sent now.
func (l *Locker) wanted(tok string) {
	if l.book.Wanted(tok) && l.batch.nheld.Load() > 0 {
		go l.batch.unhold()
	}
}

// releaseLater sends again, in the background, the release of keys for
// tok that Redis did not answer (down, failing over, or too slow for the
// release's deadline). Left alone, the keys would stay locked until
// their lease ran out (up to a ttl) though their holder is done with
// them, and every other owner would wait for them that long. It tries
// as leasebook.RetryUntilDone paces it and stops once a try is answered,
// a ttl after the failure (the keys have expired by then), or when the
// Locker stops. The release script compares the token (release.lua), so
// a repeat deletes nothing of anyone else, whether or not an earlier try
// reached Redis.
func (l *Locker) releaseLater(tok string, keys []lockmgr.Key) {
	until := time.Now().Add(l.opt.TTL)
	l.spawn(func() {
		leasebook.RetryUntilDone(l.ctx, func() bool {
			ctx, cancel := l.opCtx(l.ctx)
			err := l.releaseKeys(ctx, tok, keys, true)
			cancel()
			if err == nil {
				l.opt.Logger.Info("lock release sent again and answered", zap.Int("keys", len(keys)))
				return true
			}
			return !unavailable(err) || time.Now().After(until)
		})
	})
}

// release gives back what h holds, on a fresh bounded context, after a
// failed or abandoned acquire.
func (l *Locker) release(h *leasebook.Held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		owner, _ := l.book.OwnerOf(h)
		l.opt.Logger.Warn("lock release failed; it is sent again until Redis answers or the lease ends",
			zap.String("owner", owner.ID()), zap.Error(err))
	}
}

// releaseKeys runs the release script for keys, in one call (or one per
// key on a Cluster, whose keys hash apart), with the releases other
// sessions make at the same moment in one pipeline (batcher). Each key's
// release also takes the tickets stale (of waiters the lease was handed
// to) off its key's queue. With grant, a key freed for waiters of other
// instances is granted to the oldest of them in the same script (see
// release.lua); without, they are only woken.
func (l *Locker) releaseKeys(ctx context.Context, tok string, keys []lockmgr.Key, grant bool, stale ...string) error {
	return l.releaseKeysIn(ctx, &l.batch, tok, keys, grant, stale)
}

// releaseKeysIn is releaseKeys through batcher b.
func (l *Locker) releaseKeysIn(ctx context.Context, b *batcher, tok string, keys []lockmgr.Key, grant bool, stale []string) error {
	if len(keys) == 0 {
		return nil
	}
	cmds, err := b.do(ctx, l.releaseQueue(tok, keys, grant, stale))
	if aerr := l.afterRelease(keys, cmds); err == nil {
		err = aerr
	}
	return err
}

// releaseQueue is the queue of releaseKeys's calls, for a batch: one call
// of release_many.lua for several keys, one of release.lua per key on a
// Cluster or for one key.
func (l *Locker) releaseQueue(tok string, keys []lockmgr.Key, grant bool, stale []string) func(p redis.Pipeliner) []*redis.Cmd {
	lease := any("")
	if grant {
		lease = l.relArgs.lease
	}
	if _, cluster := l.rdb.(*redis.ClusterClient); len(keys) > 1 && !cluster {
		return l.releaseManyQueue(tok, keys, lease, stale)
	}
	args := make([]any, 0, 10+len(stale))
	args = append(args, tok, "", lease, l.relArgs.fenceTTL, l.relArgs.ticketTTL, "", "", "", "", "")
	for _, t := range stale {
		args = append(args, t)
	}
	return func(p redis.Pipeliner) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			n := l.names(k.Name)
			a := append([]any(nil), args...)
			a[1] = n.channel
			a[5], a[6], a[7], a[8], a[9] = l.releaseKeyArgs(tok, k, n)
			cmds[i] = l.sc.release.EvalSha(context.Background(), p, n.keys(), a...)
		}
		return cmds
	}
}

// manyKeys bounds the keys of one call of release_many.lua or
// renew_many.lua: a script runs alone on the server, and a statement's
// hundreds of keys in one call would hold every other client up for
// that long; in calls of at most this many, the others' commands run in
// between.
const manyKeys = 64

// releaseManyQueue is releaseQueue's calls of release_many.lua, one per
// manyKeys keys.
func (l *Locker) releaseManyQueue(tok string, keys []lockmgr.Key, lease any, stale []string) func(p redis.Pipeliner) []*redis.Cmd {
	return func(p redis.Pipeliner) []*redis.Cmd {
		var cmds []*redis.Cmd
		for part := range slices.Chunk(keys, manyKeys) {
			names := make([]string, 0, 5*len(part))
			args := make([]any, 0, 5+len(stale)+6*len(part))
			args = append(args, tok, lease, l.relArgs.fenceTTL, l.relArgs.ticketTTL, len(stale))
			for _, t := range stale {
				args = append(args, t)
			}
			for _, k := range part {
				n := l.names(k.Name)
				names = append(names, n.lock, n.queue, n.expiry, n.fence, n.grants)
				s, head, prio, owner, wound := l.releaseKeyArgs(tok, k, n)
				args = append(args, n.channel, s, head, prio, owner, wound)
			}
			cmds = append(cmds, l.sc.releaseMany.EvalSha(context.Background(), p, names, args...))
		}
		return cmds
	}
}

// releaseKeyArgs are one key's arguments of the release script beside its
// names (release.lua's ARGV 6-10): 's' when the key was most likely taken
// by the fast path (a string), and the key's local head waiter, if any,
// which the release that frees the key queues (see release.lua), read
// when the batch is sent.
func (l *Locker) releaseKeyArgs(tok string, k lockmgr.Key, n names) (s, head, prio, owner, wound any) {
	s, head, prio, owner, wound = "", "", "", "", ""
	if !k.NoHandoff {
		s = "s"
	}
	if o, p, wt, ok := l.book.QueueHead(k.Name); ok && wt != tok {
		head, prio, owner = wt, p, o.ID()
		if l.notify.listening(n.channel) {
			wound = l.woundChannel()
		}
	}
	return s, head, prio, owner, wound
}

// afterRelease reads the replies of releaseQueue's calls for keys: one
// per key, or of release_many.lua, one per manyKeys keys. It returns the
// error of a key's release inside release_many.lua (each call's own is
// cmdsErr's).
func (l *Locker) afterRelease(keys []lockmgr.Key, cmds []*redis.Cmd) error {
	dials := l.restart.dials.Load()
	var failed error
	at := 0 // the key of the next reply
	for _, c := range cmds {
		v, _ := c.Result()
		if len(cmds) == len(keys) {
			l.noteReleased(keys[at].Name, v, dials)
			at++
			continue
		}
		// release_many.lua: one reply per key of its part, none when
		// the call failed (the replies after stay at their keys)
		size := min(manyKeys, len(keys)-at)
		if part, _ := v.([]any); len(part) == size {
			for i, r := range part {
				if e, ok := r.(error); ok && failed == nil {
					failed = e
				}
				l.noteReleased(keys[at+i].Name, r, dials)
			}
		}
		at += size
	}
	return failed
}

// noteReleased reads one key's reply of the release script: a grant to a
// waiter of this Locker is known here before its announcement arrives,
// and its waiter is told now.
func (l *Locker) noteReleased(key string, reply any, dials uint64) {
	v, ok := reply.([]any)
	if !ok || len(v) != 3 {
		return
	}
	tok, _ := v[1].(string)
	f, _ := v[2].(string)
	if fence, err := strconv.ParseUint(f, 10, 64); err == nil && tok != "" {
		l.granted(key, tok, leasebook.Grant{Fence: fence, Epoch: dials})
	}
}

// granted passes a grant Redis made to one of this Locker's tickets to
// its waiter. A grant nobody here claims (see leasebook.Book.Claimed) is
// given back at once, in the background, so the key goes on to the next
// waiter instead of staying granted to nobody for a whole grant lease;
// the release is compare-and-delete on that ticket, so it can take
// nothing from anyone else. Only a ticket of this Locker can be an
// orphan here: its tokens carry this Locker's id.
func (l *Locker) granted(key, tok string, g leasebook.Grant) {
	if l.book.GrantTo(key, tok, g) || !l.ownsToken(tok) || l.book.Claimed(key, tok) || l.closed() {
		return
	}
	l.spawn(func() {
		ctx, cancel := l.opCtx(l.ctx)
		defer cancel()
		if err := l.releaseKeys(ctx, tok, []lockmgr.Key{{Name: key}}, true); err != nil && !l.closed() {
			l.opt.Logger.Debug("giving back a grant nobody waits for failed; it expires with its short lease",
				zap.String("key", key), zap.Error(err))
		}
	})
}

// ownsToken reports whether tok is a token this Locker made.
func (l *Locker) ownsToken(tok string) bool {
	i := strings.LastIndexByte(tok, 0)
	return i >= 0 && strings.HasPrefix(tok[i+1:], l.id+":")
}

// grantLease is the lease a release grants the next waiter: its ticket's
// lifetime, so a grant to a waiter that died with its ticket queued holds
// the key no longer than the ticket would have; a holder still holding it
// halfway renews it to the full TTL (renewBefore).
func (l *Locker) grantLease() time.Duration { return min(l.ticketTTL(), l.opt.TTL) }

// ticketTTL is how long a queued ticket lives without being refreshed.
func (l *Locker) ticketTTL() time.Duration { return 4 * l.opt.WaitSlice }
