package leasebook

import (
	"slices"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// gate is the local wait queue for one key: waiters of one Book ordered by
// owner age, then arrival. Only the head talks to the service, so a
// release wakes one contender per Book, not all. Guarded by Book.mu.
type gate struct {
	queue []*Waiter
}

// Waiter is one Acquire waiting for one key. Its fields but freed,
// proxied and nextChanged are fixed at Join.
type Waiter struct {
	owner lockmgr.Owner
	// prio is the age the owner asks with (Book.Priority) at Join: its
	// place in the queue. An owner waits for one key at a time and its age
	// changes only when a wait of its ends with a hand-off, so it is the
	// age every wound check of this wait uses too.
	prio  int64
	tok   string // the Acquire's token at the lock service
	seq   uint64
	wake  chan struct{} // buffered 1: something changed, look again
	freed time.Time     // when a release of the key woke it; guarded by Book.mu
	// proxied: the head queued this waiter's ticket at the service on its
	// behalf (NextInLine); guarded by Book.mu.
	proxied bool
	// nextChanged: as head, another waiter came to stand right behind it
	// since it last asked the service (NextInLine), which has not heard
	// of that one yet (TakeNextChanged); guarded by Book.mu.
	nextChanged bool
	// single: the wait may end with a local hand-off (AcceptHandoffs);
	// handed: the lease handed to it (HandOff). Guarded by Book.mu.
	single bool
	handed *Held
	// grant: a grant the service announced for tok (GrantTo); guarded by
	// Book.mu.
	grant *Grant
}

// Grant is a grant of a key that the service made to a waiter's ticket
// without being asked (a release passed the key on) and announced.
type Grant struct {
	// Fence is the fence the grant came with.
	Fence uint64
	// Epoch is the backend's connection epoch when the announcement came
	// (for redislock, its count of dials).
	Epoch uint64
}

// Wake is signalled (at most one pending signal) when the waiter should
// look again: it became head, a holder released, or its owner was wounded.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

func (w *Waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waiterOrder orders a key's local queue by the age each owner asks with,
// inherited ones included (as the service orders its queue), then by
// arrival. Ordered by the owners' own ages instead, an owner that
// inherited an older age could sit behind a younger head that does not
// wound the holder, while that holder waits for a key the owner holds:
// only the head checks for wounds, so that cycle would never break.
func waiterOrder(a, b *Waiter) int {
	switch {
	case Older(a.owner, a.prio, b.owner, b.prio):
		return -1
	case Older(b.owner, b.prio, a.owner, a.prio):
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// Join puts a new waiter for key, owner o and service token tok, into
// the local queue and makes it the owner's current wait (the one a wound
// wakes).
func (b *Book) Join(key string, o lockmgr.Owner, tok string) *Waiter {
	w := &Waiter{owner: o, tok: tok, seq: b.seq.Add(1), wake: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	w.prio = b.owners[o].priority(o)
	g := b.gates[key]
	if g == nil {
		g = &gate{}
		b.gates[key] = g
	}
	i, _ := slices.BinarySearchFunc(g.queue, w, waiterOrder)
	g.queue = slices.Insert(g.queue, i, w)
	if i == 1 {
		// The head's ticket at the service names the waiter behind it,
		// whom a grant to the head queues in the same call: tell it of
		// the new one, or a younger waiter of another instance may be
		// granted between the head's turn and this one's first ask.
		head := g.queue[0]
		head.nextChanged = true
		head.poke()
	}
	if st := b.owners[o]; st != nil {
		st.waiting = w
	}
	return w
}

// Leave removes w from key's queue and hands the turn to the next head.
func (b *Book) Leave(key string, w *Waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.owners[w.owner]; st != nil && st.waiting == w {
		st.waiting = nil
	}
	g := b.gates[key]
	if g == nil {
		return
	}
	g.queue = slices.DeleteFunc(g.queue, func(x *Waiter) bool { return x == w })
	if len(g.queue) == 0 {
		delete(b.gates, key)
		return
	}
	g.queue[0].poke()
}

// Waiting is the number of local waiters for key.
func (b *Book) Waiting(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.gates[key]; g != nil {
		return len(g.queue)
	}
	return 0
}

// Index is w's place in key's local queue: 0 for the head, -1 if absent.
func (b *Book) Index(key string, w *Waiter) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.gates[key]; g != nil {
		return slices.Index(g.queue, w)
	}
	return -1
}

// IsHead reports whether w may talk to the service for key.
func (b *Book) IsHead(key string, w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	return g != nil && len(g.queue) > 0 && g.queue[0] == w
}

// NextInLine returns the owner and token of the waiter behind head in
// key's local queue, the one that becomes head when head leaves, and marks
// it as queued at the service by proxy: a head that is granted queues that
// ticket in the same call, so this instance keeps its place in the
// service's queue while its next waiter is still being scheduled. ok is
// false when head is not the head or no one is behind it.
func (b *Book) NextInLine(key string, head *Waiter) (o lockmgr.Owner, tok string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	if g == nil || len(g.queue) < 2 || g.queue[0] != head {
		return lockmgr.Owner{}, "", false
	}
	head.nextChanged = false
	next := g.queue[1]
	next.proxied = true
	return next.owner, next.tok, true
}

// QueueHead returns the owner, age (its place in the queue) and token of
// key's local head waiter and marks it as queued at the service by proxy,
// as NextInLine does: a release that gives key back to the service queues
// that ticket in the same call, so this instance keeps its place by age
// while the waiter has not asked yet. ok is false when nobody here waits
// for key.
func (b *Book) QueueHead(key string) (o lockmgr.Owner, prio int64, tok string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	if g == nil || len(g.queue) == 0 {
		return lockmgr.Owner{}, 0, "", false
	}
	head := g.queue[0]
	head.proxied = true
	return head.owner, head.prio, head.tok, true
}

// TakeNextChanged reports whether another waiter came to stand right
// behind w since w last asked the service (NextInLine), clearing it: a
// head whose ticket is queued there asks again now rather than at its
// next wait slice, so that the service's record of its next waiter is
// current.
func (b *Book) TakeNextChanged(w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := w.nextChanged
	w.nextChanged = false
	return changed
}

// Proxied reports whether a head may have queued w's ticket at the service
// (NextInLine): a wait that fails must then clean it up.
func (b *Book) Proxied(w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.proxied
}

// WakeHead pokes the local head waiter of key, if any, because the lock
// service said key was released: the hand-off clock of that waiter starts
// (see TakeFreed).
func (b *Book) WakeHead(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.freeHeadLocked(key, time.Now())
}

func (b *Book) freeHeadLocked(key string, now time.Time) {
	if g := b.gates[key]; g != nil && len(g.queue) > 0 {
		w := g.queue[0]
		if w.freed.IsZero() {
			w.freed = now
		}
		w.poke()
	}
}

// GrantTo records that the service granted key to the local waiter whose
// ticket is tok, and wakes it (the hand-off clock starts, as for a release:
// see TakeFreed). It reports whether such a waiter is here.
func (b *Book) GrantTo(key, tok string, g Grant) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	gt := b.gates[key]
	if gt == nil {
		return false
	}
	for _, w := range gt.queue {
		if w.tok == tok {
			w.grant = &g
			if w.freed.IsZero() {
				w.freed = time.Now()
			}
			w.poke()
			return true
		}
	}
	return false
}

// Claimed reports whether a grant of key to ticket tok has someone here
// to take it: a waiter for key with that ticket, or the lease holding key
// under that token (not being released). A grant to any other ticket of
// this Book is an orphan: its waiter left before the grant was made (a
// ticket queued on its behalf as the next local waiter, or one a failed
// wait's cleanup raced with), and nobody here will ever take or release
// it, so the key would stay granted to nobody until the grant's short
// lease ran out. The backend gives such a grant back at once.
func (b *Book) Claimed(key, tok string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gt := b.gates[key]; gt != nil {
		for _, w := range gt.queue {
			if w.tok == tok {
				return true
			}
		}
	}
	h := b.holding[key]
	return h != nil && h.Tok == tok && !h.releasing
}

// HasGrant reports whether a grant was announced for w and not taken yet.
func (b *Book) HasGrant(w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.grant != nil
}

// TakeGrant returns the grant announced for w since the last call, if any.
func (b *Book) TakeGrant(w *Waiter) (Grant, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := w.grant
	w.grant = nil
	if g == nil {
		return Grant{}, false
	}
	return *g, true
}

// TakeFreed returns and clears when a release of its key last woke w (zero
// if none did since the last call). A backend takes it before each try:
// if the try wins the key, the time since is the hand-off latency.
func (b *Book) TakeFreed(w *Waiter) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := w.freed
	w.freed = time.Time{}
	return t
}

// Earliest is the earlier of two times, a zero time counting as none.
func Earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
