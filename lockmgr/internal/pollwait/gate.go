package pollwait

import (
	"slices"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// gate is the local wait queue for one key: waiters of this Engine ordered
// by owner age, then arrival. Only the head talks to the Store, so a release
// wakes one contender per Engine, not all. Guarded by Engine.mu.
type gate struct {
	queue []*waiter
}

// waiter is one Acquire waiting for one key.
type waiter struct {
	owner lockmgr.Owner
	seq   uint64
	wake  chan struct{} // buffered 1: something changed, look again
}

func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func waiterOrder(a, b *waiter) int {
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

// join puts a new waiter for key into the local queue and makes it the
// owner's current wait.
func (e *Engine) join(key string, o lockmgr.Owner) *waiter {
	w := &waiter{owner: o, seq: e.seq.Add(1), wake: make(chan struct{}, 1)}
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[key]
	if g == nil {
		g = &gate{}
		e.gates[key] = g
	}
	i, _ := slices.BinarySearchFunc(g.queue, w, waiterOrder)
	g.queue = slices.Insert(g.queue, i, w)
	if st := e.owners[o]; st != nil {
		st.waiting = w
	}
	return w
}

// leave removes w from key's queue and hands the turn to the next head.
func (e *Engine) leave(key string, w *waiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.owners[w.owner]; st != nil && st.waiting == w {
		st.waiting = nil
	}
	g := e.gates[key]
	if g == nil {
		return
	}
	g.queue = slices.DeleteFunc(g.queue, func(x *waiter) bool { return x == w })
	if len(g.queue) == 0 {
		delete(e.gates, key)
		return
	}
	g.queue[0].poke()
}

// isHead reports whether w may talk to the Store for key.
func (e *Engine) isHead(key string, w *waiter) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[key]
	return g != nil && len(g.queue) > 0 && g.queue[0] == w
}

// wakeHead pokes the local head waiter of key, if any.
func (e *Engine) wakeHead(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g := e.gates[key]; g != nil && len(g.queue) > 0 {
		g.queue[0].poke()
	}
}
