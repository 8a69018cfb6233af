package redislock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// TestObserveOneRoundTrip: observe mode's question about three keys, one
// of them held by another instance, is one round trip; so is ending the
// notes, after which nothing of them is left in Redis.
func TestObserveOneRoundTrip(t *testing.T) {
	bed := testbed.Get(t)
	pfx := prefix(t)
	holderL := redislock.New(newClient(t, bed.RedisAddr), &redislock.Options{TTL: testTTL, Prefix: pfx})
	defer holderL.Close()
	rdb := newClient(t, bed.RedisAddr)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	l := redislock.New(rdb, &redislock.Options{TTL: testTTL, Prefix: pfx})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	warm := lockmgr.Owner{Instance: "warm", Session: 1, Start: time.Now()}
	if _, err := l.Observe(ctx, warm, []lockmgr.Key{{Name: "warm-up", Rule: "r"}}); err != nil {
		t.Fatal(err)
	}
	// New loads the scripts in the background: let that finish (no round
	// trip for 100 ms) before counting.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n := rt.n.Load()
		time.Sleep(100 * time.Millisecond)
		if rt.n.Load() == n {
			break
		}
	}

	holder := lockmgr.Owner{Instance: "a", Session: 1, Start: time.Now()}
	keys := []lockmgr.Key{{Name: "held", Rule: "r"}, {Name: "free-1", Rule: "r"}, {Name: "free-2", Rule: "r"}}
	lease, err := holderL.Acquire(ctx, holder, keys[:1])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()

	watcher := lockmgr.Owner{Instance: "b/observe", Session: 1, Start: time.Now()}
	before := rt.n.Load()
	got, err := l.Observe(ctx, watcher, keys)
	if err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load() - before; n != 1 {
		t.Errorf("Observe of 3 keys: %d round trips, want 1", n)
	}
	if len(got) != 1 || !slices.Equal(got["held"], []string{holder.ID()}) {
		t.Errorf("Observe = %v, want held by %s", got, holder.ID())
	}
	notes := []string{pfx + ":{held}:o", pfx + ":{free-1}:o", pfx + ":{free-2}:o"}
	if n := rdb.Exists(ctx, notes...).Val(); n != 3 {
		t.Errorf("%d notes hashes after Observe, want 3", n)
	}
	if ttl := rdb.PTTL(ctx, notes[0]).Val(); ttl <= 0 || ttl > testTTL {
		t.Errorf("notes hash ttl %v, want in (0, %v]", ttl, testTTL)
	}
	before = rt.n.Load()
	if err := l.EndObserve(ctx, watcher, keys); err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load() - before; n != 1 {
		t.Errorf("EndObserve of 3 keys: %d round trips, want 1", n)
	}
	if n := rdb.Exists(ctx, notes...).Val(); n != 0 {
		t.Errorf("%d notes hashes left after EndObserve, want 0", n)
	}
	if !lease.Valid() {
		t.Error("the holder's lease was touched")
	}
}
