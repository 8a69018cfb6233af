package leasebook

import (
	"slices"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Local hand-off (lock cohorting). A lease on one key that is released
// while another Acquire of this Book waits for that key can pass to that
// waiter without a round trip to the lock service: the service keeps the
// grant under the lease's token, and the Book moves the Held to the new
// owner. Other instances do not starve: the lease passes only to waiters
// that were already queued when the service granted it, so each gets one
// turn, and at most a bounded number of times in a row within a bounded
// time since that grant (the backend's limits); then the release goes
// back to the service, whose queue is ordered by age.
//
// Wound-wait stays deadlock-free: the service records the first owner's
// age with the grant, so the owner the lease passes to inherits that age
// when it is older than its own (Priority) and asks with it from then on.
// A waiter elsewhere then waits for it only if it is younger than the age
// the holder asks with; keys the new owner took before with its own,
// younger age can only draw more wounds than needed, never fewer. The
// same fence stays with the key, so a key that must get a new fence with
// every grant (lockmgr.Key.NoHandoff) is never handed off.

// isWounded reports whether the owner st stands for was wounded (an older
// transaction elsewhere waits for a key it holds).
func (st *ownerState) isWounded() bool { return st != nil && st.wounded }

// priority is the age owner o asks with: its own, or the older one it
// inherited with a handed-off lease.
func (st *ownerState) priority(o lockmgr.Owner) int64 {
	if st != nil && st.prio != 0 && st.prio < o.Priority() {
		return st.prio
	}
	return o.Priority()
}

// Priority is the age (lockmgr.Owner.Priority) owner o asks the service
// with: its own, or an older one inherited with a lease handed to it.
func (b *Book) Priority(o lockmgr.Owner) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[o].priority(o)
}

// OwnerOf is the owner h is held for now, and the age it asks with.
func (b *Book) OwnerOf(h *Held) (lockmgr.Owner, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.Owner, b.owners[h.Owner].priority(h.Owner)
}

// AcceptHandoffs marks w as a wait that may be ended by a local hand-off:
// its Acquire is for its key alone, and that key may be handed off.
func (b *Book) AcceptHandoffs(w *Waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.single = true
}

// HandOff passes h, being released by its owner, to the head of the local
// queue of its key, if h holds that one key, is neither lost nor wounded,
// was handed off fewer than limit times in a row, was granted by the
// service less than window ago (window <= 0: no bound) and is still valid,
// and the head was queued before that grant, accepts hand-offs and is not
// wounded. The head is woken and ends its wait with TakeHanded. HandOff
// reports whether it passed h on; if not, the caller releases h at the
// service.
func (b *Book) HandOff(h *Held, limit int, window time.Duration) bool {
	if limit <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if !h.passable(now) || h.turnOver(now, limit, window) {
		return false
	}
	from := b.owners[h.Owner]
	if from != nil && from.wounded {
		return false // an older transaction elsewhere waits: it goes first
	}
	g := b.gates[h.keys[0].Name]
	if g == nil || len(g.queue) == 0 {
		return false
	}
	w := g.queue[0]
	to := b.owners[w.owner]
	if !w.single || w.handed != nil || to == nil || to.wounded || w.seq > h.cohort {
		return false
	}
	if from != nil {
		if from.refs--; from.refs == 0 {
			delete(b.owners, h.Owner)
		}
	}
	to.refs++
	if h.prio < to.priority(w.owner) {
		to.prio = h.prio
	}
	h.Owner = w.owner
	h.keeper = nil // the old owner's Lease has ended; the new one attaches
	h.handoffs++
	h.stale = append(h.stale, w.tok)
	w.handed = h
	if w.freed.IsZero() {
		w.freed = time.Now()
	}
	w.poke()
	return true
}

// HandOver passes h, held by its owner, to owner to of this Book, which
// asked for nothing yet (its turn comes from outside: the next batch of a
// row's statements that queued in the proxy while h's owner ran its
// own), under the bounds HandOff keeps: h holds one key, is neither lost
// nor being released, was handed on fewer than limit times in a row,
// was granted by the service less than window ago and is still valid,
// and neither owner is wounded (an older transaction elsewhere waits).
// Unlike HandOff it does not require to to have queued before the
// service's grant: to stands for statements that came while h was held,
// and the count and the window alone bound the instance's turn. On
// true the caller makes to's Lease with Attach.
func (b *Book) HandOver(h *Held, to lockmgr.Owner, limit int, window time.Duration) bool {
	if limit <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := time.Now(); !h.passable(now) || !b.mayPassLocked(h, to, now, limit, window) {
		return false
	}
	b.passLocked(h, to)
	return true
}

// mayPassLocked, with b.mu held, checks the bounds HandOver and Reclaim
// share for passing h, a lease on one key, to owner to at now: its key
// allows hand-offs, its turn (limit in a row, window since the grant) is
// not over, to is another owner, and neither owner is wounded.
func (b *Book) mayPassLocked(h *Held, to lockmgr.Owner, now time.Time, limit int, window time.Duration) bool {
	return !h.keys[0].NoHandoff && !h.turnOver(now, limit, window) && h.Owner != to &&
		!b.owners[h.Owner].isWounded() && !b.owners[to].isWounded()
}

// passLocked, with b.mu held, makes to h's owner (h's age passes on with
// it, as with a hand-off) and counts a hand-off.
func (b *Book) passLocked(h *Held, to lockmgr.Owner) {
	if from := b.owners[h.Owner]; from != nil {
		if from.refs--; from.refs == 0 {
			delete(b.owners, h.Owner)
		}
	}
	st := b.owners[to]
	if st == nil {
		st = &ownerState{}
		b.owners[to] = st
	}
	st.refs++
	if h.prio < st.priority(to) {
		st.prio = h.prio
	}
	h.Owner = to
	h.keeper = nil // the old owner's Lease ends; the new one attaches
	h.handoffs++
}

// TurnOver reports whether h, held by its owner, could be handed over
// (HandOver) but for the bounds of its turn: limit hand-offs in a row or
// window since the service's grant. The caller may then ask the service
// to keep the key for another turn (NewTurn).
func (b *Book) TurnOver(h *Held, limit int, window time.Duration) bool {
	if limit <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if !h.passable(now) || h.keys[0].NoHandoff || b.owners[h.Owner].isWounded() {
		return false
	}
	return h.turnOver(now, limit, window)
}

// NewTurn starts a new turn of hand-offs for h after the service extended
// its one key (nobody else had asked for it): as after a grant at at, with
// validity until; false when h was lost or given back meanwhile.
func (b *Book) NewTurn(h *Held, at, until time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.lost != nil || h.releasing || h.released || len(h.keys) != 1 {
		return false
	}
	h.handoffs, h.granted, h.cohort = 0, at, b.seq.Load()
	if until.After(h.validUntil) {
		h.validUntil = until
		if h.keeper != nil {
			h.keeper.Extend(until)
		}
	}
	return true
}

// Keys are the keys granted to h with their fences.
func (b *Book) Keys(h *Held) ([]lockmgr.Key, []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(h.keys), slices.Clone(h.fences)
}

// TakeHanded returns the lease handed to w (HandOff), once, or nil.
func (b *Book) TakeHanded(w *Waiter) *Held {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := w.handed
	w.handed = nil
	return h
}

// HasHanded reports whether a lease was handed to w and not taken yet.
func (b *Book) HasHanded(w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.handed != nil
}

// LocalHolder reports whether key is held by a lease of this Book that is
// not lost or being released, and the age its owner asks with. A waiter
// for it need not ask the service: it waits for the local release (or
// hand-off), and wounds the holder itself when it is older.
func (b *Book) LocalHolder(key string) (owner lockmgr.Owner, prio int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.holding[key]
	if h == nil || h.lost != nil || h.releasing || h.released {
		return lockmgr.Owner{}, 0, false
	}
	return h.Owner, b.owners[h.Owner].priority(h.Owner), true
}

// Drop forgets h, an acquire that ended with a lease handed to its waiter
// instead (TakeHanded), without waking anyone: it holds no key.
func (b *Book) Drop(h *Held) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetLocked(h)
}

// StaleTickets are the tokens of the waiters h was handed to, whose
// tickets may still be queued at the service: its release removes them.
func (b *Book) StaleTickets(h *Held) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.stale
}

// MarkContended notes that a key of h was not granted at the first ask:
// someone else held it or waited for it.
func (b *Book) MarkContended(h *Held) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.contended = true
}

// Wanted notes that someone of another process waits for a key of the
// lease whose token is tok (the lock service said so): the lease is
// contended from now on, and the function OnWanted registered for it, if
// any, runs (on its own goroutine). It reports whether that lease's
// release has started and Redis may not have it yet (a held release to
// send now).
func (b *Book) Wanted(tok string) (releasing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.toks[tok]
	if h == nil {
		return false
	}
	h.contended, h.wanted = true, true
	if f := h.onWanted; f != nil {
		h.onWanted = nil
		go f()
	}
	return h.releasing
}

// OnWanted registers f to run once when the service says an owner of
// another process waits for a key of h (Wanted), in place of the one
// registered before; false, registering nothing, when it has said so
// already.
func (b *Book) OnWanted(h *Held, f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.wanted {
		return false
	}
	h.onWanted = f
	return true
}

// Uncontended reports whether every key of h was granted at the first
// ask and h never passed between owners but by Reclaim: nobody else is
// known to want its keys.
func (b *Book) Uncontended(h *Held) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.uncontended()
}

// uncontended is Uncontended with b.mu held.
func (h *Held) uncontended() bool {
	return !h.contended && h.handoffs == h.reclaims && len(h.stale) == 0
}

// ReleasingHolder returns the lease of this Book that holds k alone (the
// same key of the same rule) and whose release has started but not
// ended, or nil.
func (b *Book) ReleasingHolder(k lockmgr.Key) *Held {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.holding[k.Name]
	if h == nil || !h.releasing || h.released || len(h.keys) != 1 || h.keys[0] != k {
		return nil
	}
	return h
}

// Reclaim passes h, whose release its owner started but the caller
// holds back unsent (the release window: nothing of it reached the
// service), to owner to, which asks for h's one key, as HandOver passes a
// held lease: under the same bounds (limit hand-offs in a row, window
// since the service's grant, still valid, neither owner wounded), and
// only while nobody else is known to want the key (h is uncontended and
// no owner of this Book waits for it: they asked first). h is then held
// again, by to; on true the caller drops the unsent release and makes
// to's Lease with Attach. On false nothing changed and the release goes
// on as it was.
func (b *Book) Reclaim(h *Held, to lockmgr.Owner, limit int, window time.Duration) bool {
	if limit <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if !h.releasing || h.released || h.lost != nil || len(h.keys) != 1 || !now.Before(h.validUntil) ||
		!h.uncontended() || h.wanted || b.holding[h.keys[0].Name] != h || !b.mayPassLocked(h, to, now, limit, window) {
		return false
	}
	if g := b.gates[h.keys[0].Name]; g != nil && len(g.queue) > 0 {
		return false
	}
	h.releasing, h.releaseAt = false, time.Time{}
	b.passLocked(h, to)
	h.reclaims++
	return true
}

// Older reports whether an owner o asking with age p has precedence over
// an owner q asking with age r (lockmgr.Owner.Older with inherited ages).
func Older(o lockmgr.Owner, p int64, q lockmgr.Owner, r int64) bool {
	if p != r {
		return p < r
	}
	return o.ID() < q.ID()
}

// Fences are the fences granted with h's keys, in their order.
func (b *Book) Fences(h *Held) []uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(h.fences)
}

// passable reports whether h may pass to another owner of its Book at now
// but for the bounds of its turn: it holds one key, is neither lost nor
// being released, and is still valid.
func (h *Held) passable(now time.Time) bool {
	return len(h.keys) == 1 && h.lost == nil && !h.releasing && !h.released && now.Before(h.validUntil)
}

// turnOver reports whether h's turn of hand-offs is over at now: limit of
// them in a row, or window (or its key's own) since the service's grant.
func (h *Held) turnOver(now time.Time, limit int, window time.Duration) bool {
	return h.handoffs >= limit || h.windowOver(now, window)
}

// windowOver reports whether the hand-offs of h, a lease on one key, are
// over by time at now: window (the backend's bound, 0: none) or the key's
// own tighter one (lockmgr.Key.HandoffWindow) has passed since the
// service granted it.
func (h *Held) windowOver(now time.Time, window time.Duration) bool {
	w := h.keys[0].HandoffBound(window)
	return w > 0 && now.Sub(h.granted) >= w
}
