package leasebook

import (
	"slices"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// gate is the local wait queue for one key: waiters of one Book ordered by
// owner age, then arrival. Only the head talks to the service, so a
// release wakes one contender per Book, not all. Guarded by Book.mu.
type gate struct {
	queue []*Waiter
}

// Waiter is one Acquire waiting for one key. Its fields are fixed at Join.
type Waiter struct {
	owner lockmgr.Owner
	seq   uint64
	wake  chan struct{} // buffered 1: something changed, look again
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

func waiterOrder(a, b *Waiter) int {
	switch {
	case a.owner.Older(b.owner):
		return -1
	case b.owner.Older(a.owner):
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// Join puts a new waiter for key into the local queue and makes it the
// owner's current wait (the one a wound wakes).
func (b *Book) Join(key string, o lockmgr.Owner) *Waiter {
	w := &Waiter{owner: o, seq: b.seq.Add(1), wake: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	if g == nil {
		g = &gate{}
		b.gates[key] = g
	}
	i, _ := slices.BinarySearchFunc(g.queue, w, waiterOrder)
	g.queue = slices.Insert(g.queue, i, w)
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

// IsHead reports whether w may talk to the service for key.
func (b *Book) IsHead(key string, w *Waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gates[key]
	return g != nil && len(g.queue) > 0 && g.queue[0] == w
}

// WakeHead pokes the local head waiter of key, if any.
func (b *Book) WakeHead(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wakeHeadLocked(key)
}

func (b *Book) wakeHeadLocked(key string) {
	if g := b.gates[key]; g != nil && len(g.queue) > 0 {
		g.queue[0].poke()
	}
}
