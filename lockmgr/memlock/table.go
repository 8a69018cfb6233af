package memlock

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// table is the lock state shared by every Locker handle of one store. All
// fields are guarded by mu.
type table struct {
	mu     sync.Mutex
	keys   map[string]*keyState
	owners map[lockmgr.Owner]*ownerState
	fence  uint64 // one counter for all keys: grows per key too
	seq    uint64
	// notes are observe mode's: per key, the owner ids that noted it,
	// in the order they did (see lockmgr.Observer).
	notes map[string][]string
}

type keyState struct {
	holder lockmgr.Owner
	queue  []*waiter // oldest owner first, then arrival
}

// ownerState is wound-wait bookkeeping for one transaction.
type ownerState struct {
	held    int     // keys held
	wounded bool    // an older transaction waits for one of its keys
	waiting *waiter // the wait in progress, if any
}

type waiter struct {
	owner   lockmgr.Owner
	seq     uint64
	signal  chan struct{} // buffered 1: state changed
	granted bool
	freed   time.Time // when the release that granted it ran
	fence   uint64
	err     error // ErrDeadlock once wounded while waiting
}

func newTable() *table {
	return &table{keys: map[string]*keyState{}, owners: map[lockmgr.Owner]*ownerState{}}
}

func (t *table) owner(o lockmgr.Owner) *ownerState {
	st := t.owners[o]
	if st == nil {
		st = &ownerState{}
		t.owners[o] = st
	}
	return st
}

func (t *table) forget(o lockmgr.Owner) {
	if st := t.owners[o]; st != nil && st.held == 0 && st.waiting == nil {
		delete(t.owners, o)
	}
}

// tryLocked grants key to o if it is free. Otherwise it queues a waiter,
// wounds a younger holder, and returns the waiter.
func (t *table) tryLocked(o lockmgr.Owner, key string) (fence uint64, w *waiter, err error) {
	ks := t.keys[key]
	if ks == nil {
		t.keys[key] = &keyState{holder: o}
		return t.grantLocked(o), nil, nil
	}
	me := t.owner(o)
	if me.wounded {
		return 0, nil, lockmgr.ErrDeadlock
	}
	if ks.holder != o && o.Older(ks.holder) {
		t.wound(ks.holder)
	}
	t.seq++
	w = &waiter{owner: o, seq: t.seq, signal: make(chan struct{}, 1)}
	i, _ := slices.BinarySearchFunc(ks.queue, w, func(a, b *waiter) int {
		switch {
		case a.owner.Older(b.owner):
			return -1
		case b.owner.Older(a.owner):
			return 1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	ks.queue = slices.Insert(ks.queue, i, w)
	me.waiting = w
	return 0, w, nil
}

func (t *table) grantLocked(o lockmgr.Owner) uint64 {
	t.fence++
	t.owner(o).held++
	return t.fence
}

// wound marks holder as a wound-wait victim and fails its wait, if any.
func (t *table) wound(holder lockmgr.Owner) {
	st := t.owner(holder)
	st.wounded = true
	if w := st.waiting; w != nil && !w.granted && w.err == nil {
		w.err = lockmgr.ErrDeadlock
		notify(w)
	}
}

// releaseLocked gives key back if o holds it and hands it to the head
// waiter. It is a no-op for a key o does not hold.
func (t *table) releaseLocked(o lockmgr.Owner, key string) {
	ks := t.keys[key]
	if ks == nil || ks.holder != o {
		return
	}
	t.owner(o).held--
	t.forget(o)
	for len(ks.queue) > 0 {
		w := ks.queue[0]
		ks.queue = ks.queue[1:]
		if w.err != nil {
			continue
		}
		ks.holder = w.owner
		w.granted, w.fence, w.freed = true, t.grantLocked(w.owner), time.Now()
		notify(w)
		return
	}
	delete(t.keys, key)
}

// leaveLocked ends w's wait for key: removes it from the queue, or, if it
// was granted meanwhile, gives the key back.
func (t *table) leaveLocked(w *waiter, key string) {
	st := t.owner(w.owner)
	if st.waiting == w {
		st.waiting = nil
	}
	if w.granted {
		t.releaseLocked(w.owner, key)
		return
	}
	if ks := t.keys[key]; ks != nil {
		ks.queue = slices.DeleteFunc(ks.queue, func(x *waiter) bool { return x == w })
	}
	t.forget(w.owner)
}

func notify(w *waiter) {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}
