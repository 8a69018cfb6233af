package redislock

import (
	"slices"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// gate is the local wait queue for one key: waiters of this Locker ordered
// by owner age, then arrival. Only the head talks to Redis, so a release
// wakes one contender per Locker, not all. Guarded by Locker.mu.
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
func (l *Locker) join(key string, o lockmgr.Owner) *waiter {
	w := &waiter{owner: o, seq: l.seq.Add(1), wake: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[key]
	if g == nil {
		g = &gate{}
		l.gates[key] = g
	}
	i, _ := slices.BinarySearchFunc(g.queue, w, waiterOrder)
	g.queue = slices.Insert(g.queue, i, w)
	if st := l.owners[o]; st != nil {
		st.waiting = w
	}
	return w
}

// leave removes w from key's queue and hands the turn to the next head.
func (l *Locker) leave(key string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.owners[w.owner]; st != nil && st.waiting == w {
		st.waiting = nil
	}
	g := l.gates[key]
	if g == nil {
		return
	}
	g.queue = slices.DeleteFunc(g.queue, func(x *waiter) bool { return x == w })
	if len(g.queue) == 0 {
		delete(l.gates, key)
		return
	}
	g.queue[0].poke()
}

// isHead reports whether w may talk to Redis for key.
func (l *Locker) isHead(key string, w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[key]
	return g != nil && len(g.queue) > 0 && g.queue[0] == w
}

// wakeHead pokes the local head waiter of key, if any.
func (l *Locker) wakeHead(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.gates[key]; g != nil && len(g.queue) > 0 {
		g.queue[0].poke()
	}
}
