package lockmgr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a grant of one or more keys to one Owner. It ends when it is
// released or lost; Done is then closed and Err says which. All methods are
// safe for concurrent use.
//
// Validity is measured on this process's monotonic clock from before the
// request that granted (or last renewed) the lock was sent, minus a margin
// for clock drift, so Valid never says true after the lock service may have
// let the lock go. The proxy must not send COMMIT unless Valid is true.
type Lease struct {
	owner   Owner
	keys    []Key
	fences  []uint64
	granted time.Time
	ledger  *Ledger
	release func(ctx context.Context) error
	pass    func(to Owner) (*Lease, bool)
	handOff func() bool
	waiters Waiters
	wanted  func(f func()) bool

	mu         sync.Mutex
	validUntil time.Time
	err        error
	done       chan struct{}

	relMu    sync.Mutex // serialises backend releases
	released bool       // the backend release succeeded
}

// LeaseSpec is what a backend knows when it grants a lease.
type LeaseSpec struct {
	Owner Owner
	// Keys as returned by NormalizeKeys; Fences[i] is the fencing token
	// granted for Keys[i].
	Keys   []Key
	Fences []uint64
	// ValidUntil is a time.Now()-based (monotonic) deadline.
	ValidUntil time.Time
	// Release gives the keys back in the backend (compare-and-delete). It
	// must be idempotent; it may be called again after an error.
	Release func(ctx context.Context) error
	// Ledger, optional, records the lease for Snapshot and metrics.
	Ledger *Ledger
	// HandOver, optional, passes the keys to another owner of the same
	// Locker without the lock service and returns the lease that owner
	// holds them by, or false when the backend's bounds on such hand-offs
	// (or the lease's state) do not allow it now (see Lease.HandOver).
	HandOver func(to Owner) (*Lease, bool)
	// HandOff, optional, releases the keys without waiting for the lock
	// service (no I/O on the caller's goroutine): by passing them to the
	// next owner of the same Locker that waits for them in this process,
	// when the backend's bounds on such hand-offs allow it, or by queueing
	// the release for a later call that the backend orders before its
	// next ones (redislock's release window); false: nothing changed
	// (see Lease.ReleaseLocal).
	HandOff func() bool
	// Waiters, optional, tells whether owners of the same Locker wait
	// for a key (Lease.Waited).
	Waiters Waiters
	// OnWanted, optional, registers a function to run once when the lock
	// service says an owner of another Locker waits for one of the keys;
	// false when it has said so already (see Lease.OnWanted).
	OnWanted func(f func()) bool
}

// Waiters counts the owners of a Locker waiting for a key in its process.
type Waiters interface {
	Waiting(key string) int
}

// Keeper is the backend's side of a Lease: it extends validity after a
// renewal and declares the lease lost. Safe for concurrent use.
type Keeper struct{ l *Lease }

// NewLease makes a Lease and the Keeper its backend uses to keep it.
func NewLease(spec LeaseSpec) (*Lease, *Keeper) {
	l := &Lease{
		owner:      spec.Owner,
		keys:       spec.Keys,
		fences:     spec.Fences,
		granted:    time.Now(),
		ledger:     spec.Ledger,
		release:    spec.Release,
		pass:       spec.HandOver,
		handOff:    spec.HandOff,
		waiters:    spec.Waiters,
		wanted:     spec.OnWanted,
		validUntil: spec.ValidUntil,
		done:       make(chan struct{}),
	}
	l.ledger.hold(l)
	return l, &Keeper{l: l}
}

// Owner is the owner the lease was granted to.
func (l *Lease) Owner() Owner { return l.owner }

// Keys are the leased keys in the order they were taken. Do not modify.
func (l *Lease) Keys() []Key { return l.keys }

// Fence is the fencing token granted with key: a number that only grows
// from one grant of that key to the next, across every instance, and is
// never reset by a release. 0 if the lease does not hold key.
func (l *Lease) Fence(key string) uint64 {
	for i, k := range l.keys {
		if k.Name == key {
			return l.fences[i]
		}
	}
	return 0
}

// Done is closed when the lease is released or lost.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lease is held, then ErrReleased or an error wrapping
// ErrLeaseLost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil is the monotonic deadline up to which the lock is known to be
// held; the zero Time once the lease has ended.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return time.Time{}
	}
	return l.validUntil
}

// Valid reports whether the lease is held and known valid right now.
func (l *Lease) Valid() bool { return l.validAt(time.Now()) }

// validAt reports whether the lease is held and known valid at now.
func (l *Lease) validAt(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && now.Before(l.validUntil)
}

// Release gives the keys back. It is idempotent: later calls return nil once
// the backend release has succeeded, and retry it after an error. Done is
// closed by the first call whatever the backend says. A lock the backend
// could not delete it deletes again in the background once the service
// answers (redislock, etcdlock, zklock: an etcd or ZooKeeper session
// outlives a short outage, and its entries with it), or it expires with
// its lease.
func (l *Lease) Release(ctx context.Context) error {
	l.end(ErrReleased)
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released {
		return nil
	}
	if err := l.release(ctx); err != nil {
		return err
	}
	l.released = true
	return nil
}

// HandOver passes the lease's keys to owner to, of the same Locker, without
// a round trip to the lock service, when the backend can and its bounds on
// local hand-offs allow it (the same as for a release to a local waiter:
// so many in a row, so long since the service granted the key, no older
// owner elsewhere waiting). l then ends as released, and the returned
// lease, with the same fences and validity, is to's; to must hold it
// alone from then on and release it. On false nothing changed: l is
// still held and must be released as usual.
//
// A hand-over is to's lock request granted without an Acquire, and is
// counted as one in the ledger's metrics (lockproxy_lock_acquire_total,
// the wait histogram): its wait is the backend's, none or the round trip
// that kept the key for another turn.
func (l *Lease) HandOver(to Owner) (*Lease, bool) {
	if l.pass == nil {
		return nil, false
	}
	start := time.Now()
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released || l.Err() != nil {
		return nil, false
	}
	next, ok := l.pass(to)
	if !ok {
		return nil, false
	}
	l.end(ErrReleased)
	l.released = true
	l.ledger.Metrics().ObserveAcquire(next.keys, start, nil)
	return next, true
}

// ReleaseLocal releases the lease when that needs no wait for the lock
// service: its keys pass to the next owner of the same Locker waiting for
// them in this process, within the backend's bounds on such hand-offs
// (as Release would), or the backend queues the release to send later,
// before any later call of the Locker (as Release would too). On false
// nothing changed: the lease is still held and must be released as usual.
func (l *Lease) ReleaseLocal() bool {
	if l.handOff == nil {
		return false
	}
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released || l.Err() != nil || !l.handOff() {
		return false
	}
	l.end(ErrReleased)
	l.released = true
	return true
}

// OnWanted registers f to run once, on a goroutine of its own, when the
// lock service says that an owner of another Locker (another instance)
// waits for one of the lease's keys, replacing what was registered
// before. It reports false, registering nothing, when the service has
// said so already. A backend that does not tell never runs f: true.
func (l *Lease) OnWanted(f func()) bool {
	if l.wanted == nil {
		return true
	}
	return l.wanted(f)
}

// Waited reports whether another owner of the same Locker, in this
// process, waits for one of the lease's keys; false when the backend
// does not say.
func (l *Lease) Waited() bool {
	if l.waiters == nil {
		return false
	}
	for _, k := range l.keys {
		if l.waiters.Waiting(k.Name) > 0 {
			return true
		}
	}
	return false
}

// end closes the lease with err unless it already ended. It reports
// whether this call ended it.
func (l *Lease) end(err error) bool {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return false
	}
	l.err = err
	l.mu.Unlock()
	// Metrics and the ledger first, so whoever wakes on Done sees them.
	l.ledger.drop(l, errors.Is(err, ErrLeaseLost))
	close(l.done)
	return true
}

// Lease is the lease this Keeper keeps.
func (k *Keeper) Lease() *Lease { return k.l }

// Extend moves the validity deadline to until (a time.Now()-based time).
// It never moves it backwards and does nothing once the lease has ended.
func (k *Keeper) Extend(until time.Time) {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	if k.l.err == nil && until.After(k.l.validUntil) {
		k.l.validUntil = until
	}
}

// Lose ends the lease as lost because of cause: Done is closed and Err
// wraps ErrLeaseLost and cause. It reports whether this call ended it (false
// if it was already released or lost).
func (k *Keeper) Lose(cause error) bool {
	return k.l.end(fmt.Errorf("%w: owner %s: %w", ErrLeaseLost, k.l.owner, cause))
}

// Expired reports whether the validity deadline has passed.
func (k *Keeper) Expired(now time.Time) bool {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return !now.Before(k.l.validUntil)
}
