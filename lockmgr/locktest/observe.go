package locktest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// observe calls Observe with a generous deadline: it must come back
// without waiting for anyone, so the deadline is never what ends it.
func observe(t *testing.T, l lockmgr.Locker, o lockmgr.Owner, ks ...lockmgr.Key) map[string][]string {
	t.Helper()
	ob, ok := l.(lockmgr.Observer)
	if !ok {
		t.Fatalf("%T does not implement lockmgr.Observer", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := ob.Observe(ctx, o, ks)
	if err != nil {
		t.Fatalf("Observe(%v) by %s: %v", names(ks), o, err)
	}
	return got
}

func endObserve(t *testing.T, l lockmgr.Locker, o lockmgr.Owner, ks ...lockmgr.Key) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.(lockmgr.Observer).EndObserve(ctx, o, ks); err != nil {
		t.Fatalf("EndObserve(%v) by %s: %v", names(ks), o, err)
	}
}

func wantInWay(t *testing.T, got map[string][]string, k lockmgr.Key, want ...lockmgr.Owner) {
	t.Helper()
	var ids []string
	for _, o := range want {
		ids = append(ids, o.ID())
	}
	if !slices.Equal(got[k.Name], ids) {
		t.Fatalf("in the way of %s: %q, want %q (all: %v)", k.Name, got[k.Name], ids, got)
	}
}

// testObserve: observe mode's question, asked of the lock service. A
// holder on another Locker is named, without the observer waiting for it
// (Observe returns while the lease is held, and the observer's Locker
// never lists a wait); observers of one key on different Lockers see the
// earlier ones, in order; a note ends with EndObserve or its ttl and
// never stands in an enforcing owner's way; the note of an instance that
// died ends within about a ttl.
func testObserve(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	ks := keys(t, 3)
	held, free, shared := ks[0], ks[1], ks[2]

	holder, watcher := newOwner("enforce"), newOwner("observe")
	lease := acquire(t, ls[0], holder, 5*time.Second, held)
	got := observe(t, ls[1], watcher, held, free)
	if lease.Err() != nil {
		t.Fatalf("holder's lease: %v", lease.Err())
	}
	for _, e := range ls[1].Snapshot() {
		if e.State == "waiting" {
			t.Fatalf("the observer's Locker lists %+v: Observe waited", e)
		}
	}
	wantInWay(t, got, held, holder)
	wantInWay(t, got, free)
	if len(got) != 1 {
		t.Fatalf("Observe = %v, want only %s", got, held.Name)
	}
	release(t, lease)
	endObserve(t, ls[1], watcher, held, free)
	wantInWay(t, observe(t, ls[0], newOwner("observe"), held), held)

	// Observers of one key on two Lockers: the later sees the earlier;
	// the earlier, observing again, keeps its place.
	first, second, third := newOwner("observe"), newOwner("observe"), newOwner("observe")
	wantInWay(t, observe(t, ls[0], first, shared), shared)
	wantInWay(t, observe(t, ls[1], second, shared), shared, first)
	wantInWay(t, observe(t, ls[0], first, shared), shared)
	wantInWay(t, observe(t, ls[1], second, shared), shared, first)

	// Notes are not locks: an enforcing owner takes the key at once and
	// is then the first in everyone's way.
	enforcer := newOwner("enforce")
	lease = acquire(t, ls[1], enforcer, 5*time.Second, shared)
	wantInWay(t, observe(t, ls[0], first, shared), shared, enforcer)
	release(t, lease)

	endObserve(t, ls[0], first, shared)
	endObserve(t, ls[0], first, shared) // idempotent
	wantInWay(t, observe(t, ls[1], second, shared), shared)
	wantInWay(t, observe(t, ls[0], third, shared), shared, second)
	endObserve(t, ls[1], second, shared)
	endObserve(t, ls[0], third, shared)
	wantInWay(t, observe(t, ls[1], newOwner("observe"), shared), shared)

	if b.TTL == 0 || b.Abandon == nil {
		return
	}
	// A note nobody ends (its instance died) stops counting after the ttl.
	dead := lockers(t, b, 1)[0]
	gone, late := newOwner("observe"), newOwner("observe")
	k := keys(t, 1)[0]
	observe(t, dead, gone, k)
	b.Abandon(dead)
	wantInWay(t, observe(t, ls[1], late, k), k, gone)
	testbed.Eventually(t, 20*time.Second, "condition", func() bool { return len(observe(t, ls[1], late, k)) == 0 })
	endObserve(t, ls[1], late, k)
}
