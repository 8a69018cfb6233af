package lockmgr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// grantAll is a Locker for Set tests: it grants whatever is asked and
// remembers each request and keeper.
type grantAll struct {
	asked   [][]string
	keepers []*lockmgr.Keeper
	release func(context.Context) error // nil: every release succeeds
}

func (g *grantAll) Acquire(_ context.Context, o lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return nil, err
	}
	var names []string
	fences := make([]uint64, len(keys))
	for i, k := range keys {
		names = append(names, k.Name)
		fences[i] = uint64(len(g.asked)*10 + i + 1)
	}
	g.asked = append(g.asked, names)
	release := g.release
	if release == nil {
		release = func(context.Context) error { return nil }
	}
	l, k := lockmgr.NewLease(lockmgr.LeaseSpec{Owner: o, Keys: keys, Fences: fences,
		ValidUntil: time.Now().Add(time.Hour), Release: release})
	g.keepers = append(g.keepers, k)
	return l, nil
}
func (g *grantAll) Snapshot() []lockmgr.Entry { return nil }
func (g *grantAll) Close() error              { return nil }

func TestSet(t *testing.T) {
	ctx := context.Background()
	g := &grantAll{}
	s := lockmgr.NewSet(g, lockmgr.Owner{Instance: "i", Session: 1, Start: time.Now()})
	steps := []struct {
		keys []lockmgr.Key
		want []string // what reaches the Locker; nil: nothing
	}{
		{ruleKeys("a"), []string{"a"}},
		{ruleKeys("a"), nil},
		{ruleKeys("b", "a", "c"), []string{"b", "c"}},
		{ruleKeys("c", "b"), nil},
	}
	for i, st := range steps {
		before := len(g.asked)
		if err := s.Acquire(ctx, st.keys); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		switch {
		case st.want == nil && len(g.asked) != before:
			t.Errorf("step %d: asked the locker for %v; want nothing (all held)", i, g.asked[before])
		case st.want != nil && (len(g.asked) != before+1 || !equal(g.asked[before], st.want)):
			t.Errorf("step %d: asked %v; want %v", i, g.asked[before:], st.want)
		}
	}
	if s.Len() != 3 || !s.Valid() || s.Fence("c") == 0 || s.ValidUntil().IsZero() {
		t.Fatalf("set: len %d valid %v", s.Len(), s.Valid())
	}
	later := time.Now().Add(2 * time.Hour)
	g.keepers[1].Extend(later)
	if !s.LastValidUntil().Equal(later) || !s.ValidUntil().Before(later) {
		t.Errorf("validity: first %v last %v; want the last to be the extended lease's %v", s.ValidUntil(), s.LastValidUntil(), later)
	}
	g.keepers[1].Lose(errors.New("gone"))
	if !errors.Is(s.Err(), lockmgr.ErrLeaseLost) || s.Valid() {
		t.Errorf("after a loss: Err %v Valid %v", s.Err(), s.Valid())
	}
	if err := s.Acquire(ctx, ruleKeys("d")); !errors.Is(err, lockmgr.ErrLeaseLost) {
		t.Errorf("Acquire on a doomed set: %v; want ErrLeaseLost", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.LastValidUntil().IsZero() {
		t.Errorf("released set: LastValidUntil %v, want zero", s.LastValidUntil())
	}
	if s.Len() != 0 || s.Err() != nil || !s.Begin(lockmgr.Owner{Instance: "i", Session: 1, Txn: 2}) {
		t.Errorf("released set not reusable")
	}
}

// TestSetReleaseSince: the keys acquired after a mark are given back, the
// ones held before it stay, whatever a later statement asked for again.
func TestSetReleaseSince(t *testing.T) {
	ctx := context.Background()
	g := &grantAll{}
	s := lockmgr.NewSet(g, lockmgr.Owner{Instance: "i", Session: 1, Start: time.Now()})
	if err := s.Acquire(ctx, ruleKeys("a", "b")); err != nil {
		t.Fatal(err)
	}
	mark := s.Mark()
	if err := s.Acquire(ctx, ruleKeys("b", "c", "d")); err != nil { // b is held: only c, d are taken
		t.Fatal(err)
	}
	if err := s.ReleaseSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if s.Holds(name) != want {
			t.Errorf("after ReleaseSince: holds %s = %v, want %v", name, !want, want)
		}
	}
	if s.Len() != 2 || s.Mark() != mark {
		t.Errorf("after ReleaseSince: len %d mark %d, want 2 and %d", s.Len(), s.Mark(), mark)
	}
	if err := g.keepers[1].Lease().Err(); !errors.Is(err, lockmgr.ErrReleased) {
		t.Errorf("the lease taken after the mark: %v, want released", err)
	}
	if err := g.keepers[0].Lease().Err(); err != nil {
		t.Errorf("the lease held before the mark: %v, want held", err)
	}
	if err := s.ReleaseSince(ctx, s.Mark()); err != nil || s.Len() != 2 {
		t.Errorf("ReleaseSince with nothing after the mark: %v, len %d", err, s.Len())
	}
}

// TestSetDetach: the detached Set keeps the leases until it releases
// them; the original is empty and takes the next owner's keys anew.
func TestSetDetach(t *testing.T) {
	ctx := context.Background()
	g := &grantAll{}
	s := lockmgr.NewSet(g, lockmgr.Owner{Instance: "i", Session: 1, Start: time.Now()})
	if err := s.Acquire(ctx, ruleKeys("a", "b")); err != nil {
		t.Fatal(err)
	}
	d := s.Detach()
	if s.Len() != 0 || s.Holds("a") || d.Len() != 2 || !d.Holds("a") {
		t.Fatalf("after Detach: set len %d, detached len %d; want 0 and 2", s.Len(), d.Len())
	}
	if !s.Begin(lockmgr.Owner{Instance: "i", Session: 1, Txn: 2}) {
		t.Fatal("a detached set does not begin the next transaction")
	}
	if err := s.Acquire(ctx, ruleKeys("a")); err != nil || len(g.asked) != 2 {
		t.Fatalf("re-acquire after Detach: %v, asked %v; want a new request", err, g.asked)
	}
	if err := g.keepers[0].Lease().Err(); err != nil {
		t.Errorf("detached lease before its release: %v, want held", err)
	}
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.keepers[0].Lease().Err(); !errors.Is(err, lockmgr.ErrReleased) {
		t.Errorf("detached lease after its release: %v, want released", err)
	}
	if err := g.keepers[1].Lease().Err(); err != nil || !s.Holds("a") {
		t.Errorf("the set's own lease after the detached release: %v, want held", err)
	}
}

// ruleKeys are keys of rule "r" with names.
func ruleKeys(names ...string) []lockmgr.Key {
	var out []lockmgr.Key
	for _, n := range names {
		out = append(out, lockmgr.Key{Name: n, Rule: "r"})
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSetHandOver: a Set passes its one single-key lease to another
// owner only when the backend hands it over, and the other owner's Set
// adopts only a lease of its own owner and keys it does not hold.
func TestSetHandOver(t *testing.T) {
	ctx := context.Background()
	a := lockmgr.Owner{Instance: "i", Session: 1, Txn: 1, Start: time.Unix(1, 0)}
	b := lockmgr.Owner{Instance: "i", Session: 2, Txn: 1, Start: time.Unix(2, 0)}
	// A backend that cannot hand over: nothing changes.
	plain := lockmgr.NewSet(&grantAll{}, a)
	if err := plain.Acquire(ctx, []lockmgr.Key{{Name: "k"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.HandOver("k", b); ok || plain.Len() != 1 {
		t.Fatalf("handed over without a backend that can (held %d)", plain.Len())
	}
	// A backend that can: the lease leaves a's Set, ended as released, and
	// b's Set adopts the new one.
	var passed []lockmgr.Owner
	spec := func(o lockmgr.Owner, keys ...string) (*lockmgr.Lease, *lockmgr.Keeper) {
		var ks []lockmgr.Key
		for _, k := range keys {
			ks = append(ks, lockmgr.Key{Name: k})
		}
		var pass func(lockmgr.Owner) (*lockmgr.Lease, bool)
		pass = func(to lockmgr.Owner) (*lockmgr.Lease, bool) {
			passed = append(passed, to)
			l, _ := lockmgr.NewLease(lockmgr.LeaseSpec{Owner: to, Keys: ks, Fences: make([]uint64, len(ks)),
				ValidUntil: time.Now().Add(time.Hour), Release: func(context.Context) error { return nil }, HandOver: pass})
			return l, true
		}
		return lockmgr.NewLease(lockmgr.LeaseSpec{Owner: o, Keys: ks, Fences: make([]uint64, len(ks)),
			ValidUntil: time.Now().Add(time.Hour), Release: func(context.Context) error { return nil }, HandOver: pass})
	}
	first, _ := spec(a, "k")
	from := lockmgr.NewSet(&grantAll{}, a)
	if err := from.Adopt(first); err != nil {
		t.Fatal(err)
	}
	if _, ok := from.HandOver("other", b); ok {
		t.Fatal("handed over a key the Set does not hold")
	}
	next, ok := from.HandOver("k", b)
	if !ok || from.Len() != 0 || !errors.Is(first.Err(), lockmgr.ErrReleased) || next.Owner() != b {
		t.Fatalf("hand-over: ok %v, left %d, old lease %v, new owner %v", ok, from.Len(), first.Err(), next.Owner())
	}
	if err := lockmgr.NewSet(&grantAll{}, a).Adopt(next); err == nil {
		t.Fatal("a Set adopted another owner's lease")
	}
	to := lockmgr.NewSet(&grantAll{}, b)
	if err := to.Adopt(next); err != nil || !to.Holds("k") {
		t.Fatalf("adopt: %v, holds %v", err, to.Holds("k"))
	}
	if err := to.Adopt(next); err == nil {
		t.Fatal("adopted a key held already")
	}
	// Two leases, or a lease of two keys: not handed over.
	two, _ := spec(b, "x", "y")
	if err := to.Adopt(two); err != nil {
		t.Fatal(err)
	}
	if _, ok := to.HandOver("k", a); ok {
		t.Fatal("handed over from a Set of two leases")
	}
	if len(passed) != 1 {
		t.Errorf("backend asked to hand over %d times, want 1", len(passed))
	}
}

// TestSetReleasesTogether: a Set's leases (one per statement of a
// transaction) are released at the same time, so a backend that sends
// the calls of one moment together can give them back in one round trip:
// here each release waits until every one has begun, which one after
// another never would. Every error is returned.
func TestSetReleasesTogether(t *testing.T) {
	const n = 4
	all := make(chan struct{})
	var calls atomic.Int32
	var failed atomic.Bool
	errOne := errors.New("one lease's release failed")
	g := &grantAll{release: func(context.Context) error {
		if calls.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return errors.New("released one after another")
		}
		if failed.CompareAndSwap(false, true) {
			return errOne
		}
		return nil
	}}
	s := lockmgr.NewSet(g, lockmgr.Owner{Instance: "i", Session: 1, Start: time.Now()})
	for i := range n {
		if err := s.Acquire(context.Background(), ruleKeys(fmt.Sprint("k", i))); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Release(context.Background())
	if !errors.Is(err, errOne) || strings.Contains(err.Error(), "one after another") {
		t.Errorf("Release = %v; want the leases released together and the one failure returned", err)
	}
	if s.Len() != 0 {
		t.Errorf("Set holds %d leases after Release", s.Len())
	}
}

// TestSetReleaseLocal: a Set releases in place every lease whose backend
// can release it without waiting for the lock service, and keeps the
// others for a usual release, which then gives back only those.
func TestSetReleaseLocal(t *testing.T) {
	ctx := context.Background()
	for _, local := range []string{"abc", "ac", ""} {
		t.Run("local="+local, func(t *testing.T) {
			var mu sync.Mutex
			var released []string // by the usual release
			g := &grantAll{}
			s := lockmgr.NewSet(g, lockmgr.Owner{Instance: "i", Session: 1, Start: time.Now()})
			var leases []*lockmgr.Lease
			for _, name := range []string{"a", "b", "c"} {
				l, _ := lockmgr.NewLease(lockmgr.LeaseSpec{Owner: s.Owner(), Keys: ruleKeys(name), Fences: []uint64{1},
					ValidUntil: time.Now().Add(time.Hour),
					Release: func(context.Context) error {
						mu.Lock()
						defer mu.Unlock()
						released = append(released, name)
						return nil
					},
					HandOff: func() bool { return strings.Contains(local, name) }})
				if err := s.Adopt(l); err != nil {
					t.Fatal(err)
				}
				leases = append(leases, l)
			}
			if got, want := s.ReleaseLocal(), len(local) == 3; got != want {
				t.Fatalf("ReleaseLocal = %v, want %v", got, want)
			}
			for i, name := range []string{"a", "b", "c"} {
				inPlace := strings.Contains(local, name)
				if s.Holds(name) == inPlace {
					t.Errorf("after ReleaseLocal the set holds %s: %v, want %v", name, s.Holds(name), !inPlace)
				}
				if err := leases[i].Err(); inPlace != errors.Is(err, lockmgr.ErrReleased) {
					t.Errorf("lease %s after ReleaseLocal: %v; released in place: %v", name, err, inPlace)
				}
			}
			if s.Len() != 3-len(local) {
				t.Errorf("set len %d after ReleaseLocal, want %d", s.Len(), 3-len(local))
			}
			if err := s.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, name := range []string{"a", "b", "c"} {
				if !strings.Contains(local, name) {
					want = append(want, name)
				}
			}
			slices.Sort(released)
			if !equal(released, want) {
				t.Errorf("the usual release gave back %v, want %v", released, want)
			}
		})
	}
}
