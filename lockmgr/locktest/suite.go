package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Backend describes the backend under test.
type Backend struct {
	// Lockers returns n fresh Lockers that share one lock store, as n
	// proxy instances would; key names are unique per test, so the store
	// may be shared between tests. The suite closes them.
	Lockers func(t *testing.T, n int) []lockmgr.Locker
	// TTL is the lease ttl the Lockers use; 0 if leases never expire
	// (memory), which skips the expiry and renewal tests.
	TTL time.Duration
	// Abandon makes l vanish as a crashed process would: no more renewals,
	// no releases. nil skips the vanished-holder test.
	Abandon func(l lockmgr.Locker)
	// Restartable, if not nil, returns two Lockers on a lock service of
	// their own, the lease ttl they use, and a func that restarts that
	// service, losing its state. Choose a ttl longer than a restart takes,
	// so that a lease from before the restart is still valid after it.
	Restartable func(t *testing.T) (ls []lockmgr.Locker, ttl time.Duration, restart func())
	// Handoffs: the Lockers pass a released single-key lease to their
	// own next waiter (lock cohorting). Fences of such a key then never
	// decrease rather than grow at each grant, and waiters are served
	// oldest first within a Locker rather than across Lockers; keys
	// marked NoHandoff keep the strict guarantees, which the suite checks
	// on them.
	Handoffs bool
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		run  func(t *testing.T, b Backend)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"AllOrNothing", testAllOrNothing},
		{"Reentrant", testReentrant},
		{"ReleaseIdempotentAndSafe", testReleaseSafe},
		{"CancelLeavesNothing", testCancel},
		{"FIFO", testFIFO},
		{"UncontendedThenContended", testUncontendedThenContended},
		{"Deadlock", testDeadlock},
		{"Transfers", testTransfers},
		{"TraceHolder", testTraceHolder},
		{"WoundedHolder", testWoundedHolder},
		{"Snapshot", testSnapshot},
		{"CloseReleases", testCloseReleases},
		{"VanishedHolderExpires", testVanished},
		{"RenewalKeepsHolder", testRenewal},
		{"RestartNeverDoubleGrants", testRestart},
		// Own first: the announcements SchemaWord's Lockers make until
		// they are heard may reach Lockers of the same prefix late (a
		// Cluster's Pub/Sub), which SchemaWordOwn would take for its own.
		{"SchemaWordOwn", testSchemaWordOwn},
		{"SchemaWord", testSchemaWord},
		{"Observe", testObserve},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
	}
}

var (
	ownerSeq atomic.Uint64
	keySeq   atomic.Uint64
)

// newOwner returns a fresh transaction owner started now (so owners made
// later are younger).
func newOwner(instance string) lockmgr.Owner {
	n := ownerSeq.Add(1)
	return lockmgr.Owner{Instance: instance, Session: n, Txn: n, Start: time.Now()}
}

// keys returns n key names unique to this test run.
func keys(t *testing.T, n int) []lockmgr.Key {
	base := fmt.Sprintf("t%d:%d:%s", time.Now().UnixNano(), keySeq.Add(1), t.Name())
	out := make([]lockmgr.Key, n)
	for i := range out {
		out[i] = lockmgr.Key{Name: fmt.Sprintf("%s:%d", base, i), Rule: "rule" + fmt.Sprint(i%2)}
	}
	return out
}

func lockers(t *testing.T, b Backend, n int) []lockmgr.Locker {
	ls := b.Lockers(t, n)
	t.Cleanup(func() {
		for _, l := range ls {
			_ = l.Close()
		}
	})
	return ls
}

// acquire takes keys with a wait of d, failing the test on error.
func acquire(t *testing.T, l lockmgr.Locker, o lockmgr.Owner, d time.Duration, ks ...lockmgr.Key) *lockmgr.Lease {
	t.Helper()
	lease, err := tryAcquire(l, o, d, ks...)
	if err != nil {
		t.Fatalf("Acquire(%v) by %s: %v", names(ks), o, err)
	}
	return lease
}

func tryAcquire(l lockmgr.Locker, o lockmgr.Owner, d time.Duration, ks ...lockmgr.Key) (*lockmgr.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Acquire(ctx, o, ks)
}

// mustWaitTimeout asserts that ks cannot be taken within d.
func mustWaitTimeout(t *testing.T, l lockmgr.Locker, d time.Duration, ks ...lockmgr.Key) {
	t.Helper()
	lease, err := tryAcquire(l, newOwner("probe"), d, ks...)
	if err == nil {
		release(t, lease)
		t.Fatalf("Acquire(%v) succeeded; want it held by someone else", names(ks))
	}
	if !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("Acquire(%v): %v; want ErrWaitTimeout", names(ks), err)
	}
}

func release(t *testing.T, l *lockmgr.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

func names(ks []lockmgr.Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Name
	}
	return out
}

// long is a wait that should never run out in a passing test.
const long = 30 * time.Second

// short is a wait that is expected to run out.
const short = 200 * time.Millisecond
