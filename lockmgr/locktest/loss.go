package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// LoseHolder checks what must happen when the service drops a holder's
// session behind its back (a revoked lease, an expired session): holder
// takes k for owner "a"; waiter waits for it as owner "b"; lose then makes
// the service drop the holder (it may first wait for the waiter to queue).
// The holder's lease must end within wait with ErrLeaseLost and not be
// valid, and the waiter must get k only once the holder's lease is no
// longer valid (never two valid holders), with a larger fence. The
// waiter's lease is released; the holder's lost lease is returned for the
// caller's further checks. how says what lose did ("its session was
// revoked"), for the messages.
func LoseHolder(t *testing.T, ctx context.Context, holder, waiter lockmgr.Locker, k lockmgr.Key,
	wait time.Duration, lose func(), how string) *lockmgr.Lease {
	t.Helper()
	a, err := holder.Acquire(ctx, lossOwner("a"), []lockmgr.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		lease      *lockmgr.Lease
		err        error
		firstValid bool // the first lease was valid when the second was granted
	}
	got := make(chan grant, 1)
	go func() {
		b, err := waiter.Acquire(ctx, lossOwner("b"), []lockmgr.Key{k})
		got <- grant{b, err, a.Valid()}
	}()
	lose()
	select {
	case <-a.Done():
	case <-time.After(wait):
		t.Fatalf("holder's lease did not end after %s", how)
	}
	if !errors.Is(a.Err(), lockmgr.ErrLeaseLost) || a.Valid() {
		t.Errorf("holder after %s: Err %v, Valid %v; want ErrLeaseLost, not valid", how, a.Err(), a.Valid())
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("waiter: %v", g.err)
	}
	if g.firstValid {
		t.Errorf("double grant: the waiter got the key while the holder's lease was still valid (%s)", how)
	}
	if g.lease.Fence(k.Name) <= a.Fence(k.Name) {
		t.Errorf("fence %d after %d; want growing", g.lease.Fence(k.Name), a.Fence(k.Name))
	}
	if err := g.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

func lossOwner(name string) lockmgr.Owner {
	return lockmgr.Owner{Instance: name, Session: 1, Txn: 1, Start: time.Now()}
}

// WarmUp takes and releases one key on l, so that what a Locker sets up
// on first use (a session, directories) is not measured. It fails b on
// error.
func WarmUp(b testing.TB, l lockmgr.Locker) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "warm", Start: time.Now()}, []lockmgr.Key{{Name: "warm-up", Rule: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	_ = lease.Release(ctx)
}

// Unavailable checks that Acquire on l, whose service (named what) is not
// there, fails with lockmgr.ErrUnavailable before ctx ends, rather than
// waiting out the caller's deadline.
func Unavailable(t *testing.T, ctx context.Context, l lockmgr.Locker, what string) {
	t.Helper()
	_, err := l.Acquire(ctx, lockmgr.Owner{Instance: "u", Start: time.Now()}, []lockmgr.Key{{Name: "k", Rule: "r"}})
	if !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("Acquire without %s: %v; want ErrUnavailable", what, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Acquire without %s used up the caller's whole wait", what)
	}
}

// WaitLost waits (until ctx ends) for lease, which the service no longer
// grants, to be found lost: Done closes, Err wraps lockmgr.ErrLeaseLost,
// Valid is false, and releasing it is still not an error.
func WaitLost(t *testing.T, ctx context.Context, lease *lockmgr.Lease) {
	t.Helper()
	select {
	case <-lease.Done():
	case <-ctx.Done():
		t.Fatal("lease loss never noticed")
	}
	if !errors.Is(lease.Err(), lockmgr.ErrLeaseLost) || lease.Valid() {
		t.Errorf("after loss: Err %v, Valid %v", lease.Err(), lease.Valid())
	}
	if err := lease.Release(ctx); err != nil {
		t.Errorf("Release of a lost lease: %v", err)
	}
}

// Owner is a fresh owner named name: one session's one transaction,
// starting now.
func Owner(name string) lockmgr.Owner {
	return lockmgr.Owner{Instance: name, Session: 1, Txn: 1, Start: time.Now()}
}
