package leasebook

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var errTest = errors.New("leasebook test: lost")

func owner(name string, start time.Time) lockmgr.Owner {
	return lockmgr.Owner{Instance: name, Session: 1, Txn: 1, Start: start}
}

func woken(w *Waiter) bool {
	select {
	case <-w.Wake():
		return true
	default:
		return false
	}
}

// TestGateOrder: the head of a key's queue is the oldest owner, then the
// first to arrive; leaving hands the turn to the next and wakes it.
func TestGateOrder(t *testing.T) {
	now := time.Now()
	old, young := owner("old", now.Add(-time.Minute)), owner("young", now)
	tests := []struct {
		name     string
		arrivals []lockmgr.Owner
		head     int // index into arrivals
	}{
		{"older first", []lockmgr.Owner{old, young}, 0},
		{"older later", []lockmgr.Owner{young, old}, 1},
		{"same age: first come", []lockmgr.Owner{young, young}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nil)
			var ws []*Waiter
			for _, o := range tc.arrivals {
				ws = append(ws, b.Join("k", o, ""))
			}
			for i, w := range ws {
				if got := b.IsHead("k", w); got != (i == tc.head) {
					t.Fatalf("waiter %d head %v; want %v", i, got, i == tc.head)
				}
			}
			next := ws[1-tc.head]
			b.Leave("k", ws[tc.head])
			if !b.IsHead("k", next) || !woken(next) {
				t.Fatalf("after the head left, the other is not a woken head")
			}
			b.Leave("k", next)
			if b.IsHead("k", next) {
				t.Fatalf("a waiter that left is still head")
			}
		})
	}
}

// TestBookLeases: validity is the earliest grant's, renewal extends it
// only while no key was granted since, a wound wakes the owner's wait, and
// overdue leases are lost.
func TestBookLeases(t *testing.T) {
	b := New(nil)
	o := owner("a", time.Now())
	h := b.Begin("tok", o)
	w := b.Join("k2", o, "")
	t0 := time.Now()
	b.Granted(h, lockmgr.Key{Name: "k1"}, 7, t0.Add(time.Hour))
	b.Granted(h, lockmgr.Key{Name: "k2"}, 8, t0.Add(time.Minute))
	rs := b.Renewals()
	if len(rs) != 1 || len(rs[0].Keys) != 2 || rs[0].Fences[1] != 8 || !rs[0].Valid {
		t.Fatalf("Renewals = %+v; want one valid lease of 2 keys", rs)
	}
	b.Renewed(h, 1, t0.Add(2*time.Hour)) // renewed fewer keys than held: no extension
	if _, _, fences := b.Releasing(h); len(fences) != 2 {
		t.Fatalf("fences %v", fences)
	}
	if d := b.ExpireOverdue(errTest); d <= 0 || d > time.Minute {
		t.Fatalf("next deadline in %v; want within the earliest grant's minute", d)
	}
	b.WoundToken("tok")
	if !b.Wounded(o) || !woken(w) {
		t.Fatalf("wound did not mark the owner or wake its wait")
	}
	if held, wounded := b.OwnerHeld(o); held != nil || !wounded {
		t.Fatalf("OwnerHeld = %v, %v; want nil, wounded", held, wounded)
	}
	b.Renewed(h, 2, t0.Add(-time.Second)) // validity already over
	b.ExpireOverdue(errTest)
	if len(b.Renewals()) != 0 {
		t.Fatalf("a lost lease is still renewed")
	}
	b.Leave("k2", w)
	b.Forget(h)
	if len(b.All()) != 0 || b.Wounded(o) {
		t.Fatalf("forgotten lease or owner state left behind")
	}
}

// TestSession: members of a lost session are lost, a member joining a lost
// session is lost at once, and owners' wounds outlive only their last use.
func TestSession(t *testing.T) {
	var mu sync.Mutex
	s := NewSession(time.Now().Add(time.Minute))
	m := &Member{Owner: owner("a", time.Now())}
	mu.Lock()
	s.Join(m)
	busy := s.Busy()
	s.Extend(time.Now().Add(time.Hour))
	mu.Unlock()
	if !busy || time.Until(s.ValidUntil()) < 30*time.Minute {
		t.Fatalf("busy %v, valid until %v", busy, s.ValidUntil())
	}
	forgot := 0
	s.Lose(&mu, errTest, zap.NewNop(), func() { forgot++ })
	s.Lose(&mu, errTest, zap.NewNop(), func() { forgot++ })
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed")
	}
	if forgot != 1 || !errors.Is(m.lost, errTest) {
		t.Fatalf("forget ran %d times, member lost %v", forgot, m.lost)
	}
	late := &Member{Owner: m.Owner}
	s.Join(late)
	if !errors.Is(late.lost, errTest) || !late.Release(s) || late.Release(s) {
		t.Fatalf("late member: lost %v", late.lost)
	}

	own := NewOwners()
	st := own.Ref("a")
	own.Ref("a")
	own.Wound("a")
	own.Wound("a") // twice is fine
	if !st.IsWounded() || own.Unref("a") || !own.Unref("a") {
		t.Fatalf("wound or reference counting wrong")
	}
}

// TestNextInLine: only the head learns who is behind it, and that waiter
// is marked as queued by proxy (so its failed wait cleans up its ticket).
func TestNextInLine(t *testing.T) {
	b := New(nil)
	t0 := time.Now()
	first, second, third := owner("a", t0), owner("b", t0.Add(time.Second)), owner("c", t0.Add(2*time.Second))
	w3 := b.Join("k", third, "t3")
	w1 := b.Join("k", first, "t1")
	w2 := b.Join("k", second, "t2")
	if _, _, ok := b.NextInLine("k", w2); ok {
		t.Fatal("a waiter that is not the head got the next in line")
	}
	o, tok, ok := b.NextInLine("k", w1)
	if !ok || o != second || tok != "t2" {
		t.Fatalf("NextInLine = %v %q %v; want the second-oldest owner and its token", o, tok, ok)
	}
	if !b.Proxied(w2) || b.Proxied(w1) || b.Proxied(w3) {
		t.Fatalf("proxied = %v %v %v; want only the next in line", b.Proxied(w1), b.Proxied(w2), b.Proxied(w3))
	}
	b.Leave("k", w1)
	b.Leave("k", w2)
	if _, _, ok := b.NextInLine("k", w3); ok {
		t.Fatal("a lone head got a next in line")
	}
}

// TestRenewCtx: a renewal is bounded by the latest validity among the
// leases it renews, and by opTimeout only where that is later.
func TestRenewCtx(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		valid []time.Duration // each lease's validity left
		want  time.Duration
	}{
		{[]time.Duration{10 * time.Second, 20 * time.Second}, 20 * time.Second},
		{[]time.Duration{100 * time.Millisecond}, time.Second},
		{nil, time.Second},
	} {
		var rs []Renewal
		for _, v := range c.valid {
			rs = append(rs, Renewal{ValidUntil: now.Add(v)})
		}
		ctx, cancel := RenewCtx(context.Background(), rs, time.Second)
		d, ok := ctx.Deadline()
		cancel()
		if got := d.Sub(now); !ok || got < c.want || got > c.want+time.Second {
			t.Errorf("validity %v: deadline in %v, want %v", c.valid, got, c.want)
		}
	}
}

// TestKeyHandoffWindow: a key's own hand-off window (Key.HandoffWindow)
// ends its hand-overs before the backend's longer one; without it, or
// when it is the longer, the backend's bound decides.
func TestKeyHandoffWindow(t *testing.T) {
	for _, tc := range []struct {
		name           string
		key, backend   time.Duration
		age            time.Duration // since the service's grant
		wantHandedOver bool
	}{
		{"key's window not over", 20 * time.Millisecond, time.Second, 5 * time.Millisecond, true},
		{"key's window over", 20 * time.Millisecond, time.Second, 30 * time.Millisecond, false},
		{"no key window", 0, time.Second, 30 * time.Millisecond, true},
		{"backend's the tighter", time.Second, 20 * time.Millisecond, 30 * time.Millisecond, false},
		{"backend unbounded", 20 * time.Millisecond, 0, 30 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nil)
			from := owner("a", time.Now())
			h := b.Begin("tok", from)
			b.Granted(h, lockmgr.Key{Name: "k", HandoffWindow: tc.key}, 1, time.Now().Add(time.Hour))
			h.granted = time.Now().Add(-tc.age)
			to := lockmgr.Owner{Instance: "a", Session: 2, Txn: 1, Start: time.Now()}
			if got := b.HandOver(h, to, 64, tc.backend); got != tc.wantHandedOver {
				t.Fatalf("HandOver %v after %v (key window %v, backend's %v); want %v", got, tc.age, tc.key, tc.backend, tc.wantHandedOver)
			}
		})
	}
}

// TestNewTurn: a lease at its hand-off bounds (count or window) reports
// TurnOver, and after NewTurn (the service kept the key) it is handed
// over again, from a fresh count and window; a lease handed over within
// its bounds, one being released, or one whose owner was wounded is not
// at a turn's end.
func TestNewTurn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handoffs int
		age      time.Duration
		wounded  bool
		want     bool
	}{
		{"within the bounds", 1, time.Millisecond, false, false},
		{"count reached", 2, time.Millisecond, false, true},
		{"window over", 0, time.Second, false, true},
		{"wounded", 2, time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nil)
			from := owner("a", time.Now())
			h := b.Begin("tok", from)
			b.Granted(h, lockmgr.Key{Name: "k"}, 1, time.Now().Add(time.Second))
			h.handoffs, h.granted = tc.handoffs, time.Now().Add(-tc.age)
			if tc.wounded {
				b.owners[from].wounded = true
			}
			to := lockmgr.Owner{Instance: "a", Session: 2, Txn: 1, Start: time.Now()}
			if got := b.TurnOver(h, 2, 100*time.Millisecond); got != tc.want {
				t.Fatalf("TurnOver %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			if b.HandOver(h, to, 2, 100*time.Millisecond) {
				t.Fatal("handed over past its bounds")
			}
			until := time.Now().Add(time.Hour)
			if !b.NewTurn(h, time.Now(), until) {
				t.Fatal("NewTurn refused for a held lease")
			}
			if !b.HandOver(h, to, 2, 100*time.Millisecond) {
				t.Fatal("not handed over after NewTurn")
			}
			if h.handoffs != 1 || !h.validUntil.Equal(until) {
				t.Errorf("after NewTurn and a hand-over: %d hand-offs, valid until %v; want 1, %v", h.handoffs, h.validUntil, until)
			}
			b.StartRelease(h)
			if b.TurnOver(h, 2, 100*time.Millisecond) || b.NewTurn(h, time.Now(), until) {
				t.Error("a lease being released starts a new turn")
			}
		})
	}
}

// TestReleaseStartsHandoffClock: a release's start starts the hand-off
// clock of the key's local head without waking it (the service does not
// have the release yet); forgetting the lease then wakes it, keeping the
// earlier time.
func TestReleaseStartsHandoffClock(t *testing.T) {
	b := New(nil)
	h := b.Begin("tok", owner("a", time.Now()))
	b.Granted(h, lockmgr.Key{Name: "k"}, 1, time.Now().Add(time.Hour))
	w := b.Join("k", owner("b", time.Now()), "")
	before := time.Now()
	b.StartRelease(h)
	started := time.Now()
	if woken(w) {
		t.Fatal("the head was woken before the service had the release")
	}
	time.Sleep(20 * time.Millisecond) // the release's round trip
	b.Forget(h)
	if !woken(w) {
		t.Fatal("the head was not woken once the lease was forgotten")
	}
	if freed := b.TakeFreed(w); freed.Before(before) || freed.After(started) {
		t.Fatalf("hand-off clock %v, want the release's start (%v to %v)", freed, before, started)
	}
}

// TestWanted: the service's word that another process waits for a lease
// runs what OnWanted registered, once, and marks the lease contended; a
// registration after that word is refused; a token the Book does not
// know changes nothing.
func TestWanted(t *testing.T) {
	b := New(nil)
	h := b.Begin("tok", owner("a", time.Now()))
	ran := make(chan struct{}, 2)
	if !b.OnWanted(h, func() { ran <- struct{}{} }) {
		t.Fatal("OnWanted before any word = false; want the function registered")
	}
	if b.Wanted("other") {
		t.Error("Wanted of an unknown token reports a release under way")
	}
	if !b.Uncontended(h) {
		t.Error("a word about another token made the lease contended")
	}
	if b.Wanted("tok") {
		t.Error("Wanted reports a release under way for a lease not being released")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the registered function did not run")
	}
	if b.Uncontended(h) {
		t.Error("a wanted lease is still uncontended")
	}
	b.Wanted("tok")
	select {
	case <-ran:
		t.Error("the registered function ran twice")
	case <-time.After(100 * time.Millisecond):
	}
	if b.OnWanted(h, func() {}) {
		t.Error("OnWanted after the word = true; want it refused")
	}
	b.StartRelease(h)
	if !b.Wanted("tok") {
		t.Error("Wanted of a lease being released = false; want true (a held release to send now)")
	}
}

// TestReclaim: a lease whose release has started but not reached the
// service passes to another owner that asks for its key (Reclaim) within
// the bounds of hand-offs, and is held again and still uncontended
// after; it does not when the release has not started or is over, when
// the service said someone else waits for the key, when an owner of the
// Book queued for it first, when its owner is wounded, or past the
// bounds.
func TestReclaim(t *testing.T) {
	const limit, window = 2, 100 * time.Millisecond
	for _, tc := range []struct {
		name  string
		setup func(b *Book, h *Held)
		want  bool
	}{
		{"held back", func(b *Book, h *Held) { b.StartRelease(h) }, true},
		{"not being released", func(b *Book, h *Held) {}, false},
		{"released", func(b *Book, h *Held) { b.StartRelease(h); b.Forget(h) }, false},
		{"wanted", func(b *Book, h *Held) { b.StartRelease(h); b.Wanted(h.Tok) }, false},
		{"a local waiter first", func(b *Book, h *Held) {
			b.Join("k", owner("c", time.Now()), "")
			b.StartRelease(h)
		}, false},
		{"wounded", func(b *Book, h *Held) { b.StartRelease(h); b.MarkWounded(h.Owner) }, false},
		{"count reached", func(b *Book, h *Held) { h.handoffs, h.reclaims = limit, limit; b.StartRelease(h) }, false},
		{"window over", func(b *Book, h *Held) { h.granted = time.Now().Add(-time.Second); b.StartRelease(h) }, false},
		{"handed off before", func(b *Book, h *Held) { h.handoffs = 1; b.StartRelease(h) }, false},
		{"lost", func(b *Book, h *Held) { b.StartRelease(h); b.Lose(h, errTest) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nil)
			from := owner("a", time.Now())
			h := b.Begin("tok", from)
			b.Granted(h, lockmgr.Key{Name: "k"}, 7, time.Now().Add(time.Hour))
			tc.setup(b, h)
			to := lockmgr.Owner{Instance: "a", Session: 2, Txn: 1, Start: time.Now()}
			if r := b.ReleasingHolder(lockmgr.Key{Name: "k"}); (r == h) != (h.releasing && !h.released) {
				t.Errorf("ReleasingHolder(k) = %v while the lease's release started %v, ended %v", r, h.releasing, h.released)
			}
			if b.ReleasingHolder(lockmgr.Key{Name: "k", Rule: "other"}) != nil {
				t.Error("ReleasingHolder found the lease for the same row under another rule")
			}
			if got := b.Reclaim(h, to, limit, window); got != tc.want {
				t.Fatalf("Reclaim %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			if h.Owner != to || b.ReleasingHolder(lockmgr.Key{Name: "k"}) != nil {
				t.Errorf("after Reclaim: owner %v, releasing holder %v; want %v holding k, not releasing", h.Owner, b.ReleasingHolder(lockmgr.Key{Name: "k"}), to)
			}
			if owner, _, ok := b.LocalHolder("k"); !ok || owner != to {
				t.Errorf("LocalHolder after Reclaim: %v, %v; want %v", owner, ok, to)
			}
			if !b.Uncontended(h) {
				t.Error("a reclaimed lease is not uncontended: its next release would not be held")
			}
			if fences := b.Fences(h); len(fences) != 1 || fences[0] != 7 {
				t.Errorf("fences after Reclaim %v, want [7]", fences)
			}
		})
	}
}

// TestRetryUntilDone: tries go on until one reports done, and none is made
// once the context has ended.
func TestRetryUntilDone(t *testing.T) {
	tries := 0
	RetryUntilDone(context.Background(), func() bool {
		tries++
		return tries == 3
	})
	if tries != 3 {
		t.Errorf("%d tries; want 3 (the third reported done)", tries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	RetryUntilDone(ctx, func() bool {
		t.Error("a try after the context ended")
		return true
	})
}
