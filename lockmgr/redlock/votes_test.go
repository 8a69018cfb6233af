package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
)

func clients(t *testing.T, as []string) []*redis.Client {
	out := make([]*redis.Client, len(as))
	for i, a := range as {
		out[i] = redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = out[i].Close() })
	}
	return out
}

// occupy makes key look held by a stranger on server c.
func occupy(t *testing.T, ctx context.Context, c *redis.Client, lock string) {
	t.Helper()
	if err := c.HSet(ctx, lock, "tok", "stranger", "own", "stranger", "prio", 0, "f", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, lock, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestVotes: a key held by a stranger on one server of three is granted
// (majority); on two of three it is not, and the grant the free server
// gave during the wait is given back.
func TestVotes(t *testing.T) {
	as := sharedAddrs(t)
	cs := clients(t, as)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		occupied int
		granted  bool
	}{{"MinorityHeld", 1, true}, {"MajorityHeld", 2, false}} {
		t.Run(tc.name, func(t *testing.T) {
			pfx := prefix()
			l := dial(t, as, pfx, testTTL)
			defer l.Close()
			lock := pfx + ":{k}"
			for i := range tc.occupied {
				occupy(t, ctx, cs[i], lock)
			}
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			lease, err := l.Acquire(wctx, locktest.Owner("o"), []lockmgr.Key{{Name: "k", Rule: "r"}})
			wcancel()
			if tc.granted {
				if err != nil {
					t.Fatalf("Acquire with a majority free: %v", err)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, lockmgr.ErrWaitTimeout) {
				t.Fatalf("Acquire with a majority held by a stranger: %v; want ErrWaitTimeout", err)
			}
			for i := tc.occupied; i < len(cs); i++ {
				if n := cs[i].Exists(ctx, lock).Val(); n != 0 {
					t.Errorf("server %d still holds a minority grant after the failed Acquire", i)
				}
			}
		})
	}
}

// TestFenceRaisedOnRelease: a fence granted through one server's high
// counter is pushed to the other servers by the release, so the next grant
// by a majority without that server still gets a larger fence.
func TestFenceRaisedOnRelease(t *testing.T) {
	as := sharedAddrs(t)
	cs := clients(t, as)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pfx := prefix()
	l := dial(t, as, pfx, testTTL)
	defer l.Close()
	lock, key := pfx+":{k}", []lockmgr.Key{{Name: "k", Rule: "r"}}
	const high = uint64(8e15) // beyond any time seed in µs, exact in a Lua number
	if err := cs[0].Set(ctx, lock+":fence", high, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	occupy(t, ctx, cs[2], lock) // the first grant must come from servers 0 and 1
	first, err := l.Acquire(ctx, locktest.Owner("a"), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs[2].Del(ctx, lock).Err(); err != nil {
		t.Fatal(err)
	}
	if f := first.Fence("k"); f <= high {
		t.Fatalf("fence %d; want the maximum over the servers (> %d)", f, high)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	occupy(t, ctx, cs[0], lock) // the next grant comes from servers 1 and 2
	next, err := l.Acquire(ctx, locktest.Owner("b"), key)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if next.Fence("k") <= first.Fence("k") {
		t.Errorf("fence %d after %d; want growing", next.Fence("k"), first.Fence("k"))
	}
}

// TestRenewalRestoresLostKey: a server that lost a held key (as after a
// restart without persistence) gets it back from the next renewal while
// the lease is valid, so the lock again survives one more failure.
func TestRenewalRestoresLostKey(t *testing.T) {
	as := sharedAddrs(t)
	cs := clients(t, as)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pfx := prefix()
	l := dial(t, as, pfx, testTTL)
	defer l.Close()
	lock := pfx + ":{k}"
	lease, err := l.Acquire(ctx, locktest.Owner("a"), []lockmgr.Key{{Name: "k", Rule: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns once a majority granted; the last server's grant
	// may still be on its way.
	tok := cs[1].HGet(ctx, lock, "tok").Val()
	for _, c := range cs {
		for c.HGet(ctx, lock, "tok").Val() == "" {
			if ctx.Err() != nil {
				t.Fatal("the lock never reached every server")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if tok == "" {
			tok = c.HGet(ctx, lock, "tok").Val()
		}
	}
	if err := cs[0].Del(ctx, lock).Err(); err != nil {
		t.Fatal(err)
	}
	for cs[0].HGet(ctx, lock, "tok").Val() != tok {
		if ctx.Err() != nil {
			t.Fatal("lost key never restored")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !lease.Valid() {
		t.Errorf("lease not valid after the restore: %v", lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Exists(ctx, lock).Val() != 0 {
			t.Errorf("server %d still holds the lock after release", i)
		}
	}
}
