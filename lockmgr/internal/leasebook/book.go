package leasebook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Book is the bookkeeping of one Locker: local wait queues, wound-wait
// state per owner and the leases being acquired or held. Safe for
// concurrent use; it never calls out while holding its lock, except to
// Keeper.Extend.
type Book struct {
	log *zap.Logger
	seq atomic.Uint64

	mu     sync.Mutex
	gates  map[string]*gate // key name -> local wait queue
	owners map[lockmgr.Owner]*ownerState
	held   map[*Held]struct{} // leases (also half-acquired) to renew
	toks   map[string]*Held
	// holding is the lease holding each key granted to this Book.
	holding map[string]*Held
}

// ownerState is wound-wait bookkeeping for one transaction.
type ownerState struct {
	refs    int     // acquires in progress plus leases held
	wounded bool    // an older transaction waits for a key it holds
	waiting *Waiter // its wait in progress, if any
	// prio, when not 0, is the age the owner inherited with a lease
	// handed to it (HandOff): older than its own, and used for its
	// requests from then on (see Priority).
	prio int64
}

// Held is a lease being acquired or held, which the renewal loop keeps.
// Tok is fixed, and so is Owner unless the lease is handed to another
// owner (HandOff: then read it with Book.OwnerOf); the rest is guarded by
// the Book and read or changed through its methods.
type Held struct {
	// Tok is the lease's token at the service, unique per lease.
	Tok string
	// Owner is the transaction the lease is for.
	Owner lockmgr.Owner
	// prio is the owner priority the service recorded with the grant.
	prio int64
	// handoffs counts the local hand-offs since the service granted it;
	// stale lists the tokens of the waiters it was handed to, whose
	// tickets may still be queued at the service (see StaleTickets).
	handoffs int
	stale    []string
	// reclaims counts the hand-offs among them that took the lease back
	// from a release not yet sent (Reclaim): nobody else asked for it.
	reclaims int
	// granted is when the service granted the first key, the start of
	// this instance's turn with it, which hand-offs continue; cohort is
	// the Book's last waiter sequence then: only waiters that were
	// already queued may be handed the lease.
	granted time.Time
	cohort  uint64

	keys       []lockmgr.Key // granted so far
	fences     []uint64      // fences[i] was granted with keys[i]
	validUntil time.Time     // monotonic; zero until the first grant
	lost       error         // set when renewal found it lost
	keeper     *lockmgr.Keeper
	releasing  bool // a release was sent: renewal must not restore keys
	// releaseAt is when the release started (StartRelease), for Releases.
	releaseAt time.Time
	released  bool
	// contended is set when a key of h was waited for (see Contended).
	contended bool
	// wanted: the service said an owner of another Book waits for a key
	// of h (Wanted); onWanted, registered by OnWanted, runs once then.
	wanted   bool
	onWanted func()
}

// New makes an empty Book; log (nil: no-op) gets the lost-lease warnings.
func New(log *zap.Logger) *Book {
	if log == nil {
		log = zap.NewNop()
	}
	return &Book{log: log, gates: map[string]*gate{}, owners: map[lockmgr.Owner]*ownerState{},
		held: map[*Held]struct{}{}, toks: map[string]*Held{}, holding: map[string]*Held{}}
}

// Begin registers an acquire in progress for owner under token tok.
func (b *Book) Begin(tok string, owner lockmgr.Owner) *Held {
	h := &Held{Tok: tok, Owner: owner}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.owners[owner]
	if st == nil {
		st = &ownerState{}
		b.owners[owner] = st
	}
	st.refs++
	h.prio = st.priority(owner)
	b.held[h] = struct{}{}
	b.toks[h.Tok] = h
	return h
}

// Granted records that key k was granted to h with fence, known held until
// until; the lease's validity is the earliest of its keys'.
func (b *Book) Granted(h *Held, k lockmgr.Key, fence uint64, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.keys = append(h.keys, k)
	h.fences = append(h.fences, fence)
	b.holding[k.Name] = h
	if h.granted.IsZero() {
		h.granted, h.cohort = time.Now(), b.seq.Load()
	}
	if h.validUntil.IsZero() || until.Before(h.validUntil) {
		h.validUntil = until
	}
}

// Attach ends a successful acquire of keys with fences: it makes the Lease
// (released by release, handed over by handOver, nil: never) and hands its
// Keeper to renewal. If renewal lost
// h meanwhile, the lease is released again on a context from fresh and
// the error wraps lockmgr.ErrLeaseLost.
func (b *Book) Attach(h *Held, keys []lockmgr.Key, fences []uint64, ledger *lockmgr.Ledger,
	release func(context.Context) error, fresh func() (context.Context, context.CancelFunc),
	handOver func(lockmgr.Owner) (*lockmgr.Lease, bool), handOff func() bool) (*lockmgr.Lease, error) {
	b.mu.Lock()
	validUntil, owner := h.validUntil, h.Owner
	b.mu.Unlock()
	lease, keeper := lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner: owner, Keys: keys, Fences: fences, ValidUntil: validUntil,
		Release: release, Ledger: ledger, HandOver: handOver, HandOff: handOff, Waiters: b,
		OnWanted: func(f func()) bool { return b.OnWanted(h, f) },
	})
	// From here on renewal talks to the keeper; a loss before that is
	// reported as the error of this Acquire.
	b.mu.Lock()
	lostErr := h.lost
	if lostErr == nil {
		h.keeper = keeper
		keeper.Extend(h.validUntil)
	}
	b.mu.Unlock()
	if lostErr != nil {
		ctx, cancel := fresh()
		defer cancel()
		_ = lease.Release(ctx)
		return nil, fmt.Errorf("%w: while acquiring: %w", lockmgr.ErrLeaseLost, lostErr)
	}
	return lease, nil
}

// StartRelease marks h as being released (a renewal must no longer
// restore its keys) and returns the keys granted so far with their fences.
// The hand-off clock of each key's local head starts now, without waking
// it (Forget does, once the service has the release): a head that polls
// the service meanwhile and finds the key free still counts its wait as
// ended by this release.
func (b *Book) StartRelease(h *Held) ([]lockmgr.Key, []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.releasing = true
	now := time.Now()
	h.releaseAt = now
	for _, k := range h.keys {
		if g := b.gates[k.Name]; g != nil && len(g.queue) > 0 && g.queue[0].freed.IsZero() {
			g.queue[0].freed = now
		}
	}
	return h.keys, h.fences
}

// Releasing reports whether h is being released, with its keys and fences.
func (b *Book) Releasing(h *Held) (bool, []lockmgr.Key, []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.releasing, h.keys, h.fences
}

// Forget drops h from renewal and owner bookkeeping (once) and wakes the
// local waiters of its keys.
func (b *Book) Forget(h *Held) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.forgetLocked(h) {
		return
	}
	now := time.Now()
	for _, k := range h.keys {
		if b.holding[k.Name] == h {
			delete(b.holding, k.Name)
		}
		b.freeHeadLocked(k.Name, now)
	}
}

// forgetLocked drops h from renewal and owner bookkeeping; false if it
// was dropped already.
func (b *Book) forgetLocked(h *Held) bool {
	if h.released {
		return false
	}
	h.released = true
	delete(b.held, h)
	delete(b.toks, h.Tok)
	if st := b.owners[h.Owner]; st != nil {
		if st.refs--; st.refs == 0 {
			delete(b.owners, h.Owner)
		}
	}
	return true
}

// All lists every lease the Book keeps (for a Locker that stops).
func (b *Book) All() []*Held {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Held, 0, len(b.held))
	for h := range b.held {
		out = append(out, h)
	}
	return out
}

// Release is a release that has started and that the service may not have
// yet (StartRelease, until Forget): its keys are still taken there.
type Release struct {
	Owner lockmgr.Owner
	Keys  []lockmgr.Key
	Since time.Time // when it started
}

// Releases lists the releases under way.
func (b *Book) Releases() []Release {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Release
	for h := range b.held {
		if h.releasing && len(h.keys) > 0 {
			out = append(out, Release{Owner: h.Owner, Keys: h.keys, Since: h.releaseAt})
		}
	}
	return out
}

// Holding is what an owner holds under one token.
type Holding struct {
	Tok  string
	Keys []lockmgr.Key
}

// OwnerHeld lists what o holds (including keys granted so far to acquires
// in progress), and whether it is known wounded (then the list is nil).
func (b *Book) OwnerHeld(o lockmgr.Owner) ([]Holding, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.owners[o]; st != nil && st.wounded {
		return nil, true
	}
	var out []Holding
	for h := range b.held {
		if h.Owner == o && len(h.keys) > 0 {
			out = append(out, Holding{Tok: h.Tok, Keys: h.keys})
		}
	}
	return out, false
}

// Wounded reports whether o is known wounded.
func (b *Book) Wounded(o lockmgr.Owner) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.owners[o]
	return st != nil && st.wounded
}

// MarkWounded records that owner o was wounded and wakes its wait.
func (b *Book) MarkWounded(o lockmgr.Owner) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.markWoundedLocked(o)
}

// WoundToken marks the owner of token tok wounded and wakes its wait.
// Unknown tokens (already released) are ignored.
func (b *Book) WoundToken(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.toks[tok]; h != nil {
		b.markWoundedLocked(h.Owner)
	}
}

func (b *Book) markWoundedLocked(o lockmgr.Owner) {
	if st := b.owners[o]; st != nil {
		st.wounded = true
		if st.waiting != nil {
			st.waiting.poke()
		}
	}
}

// DeadlockErr is the error of a wait of owner o for k that a wound ended.
func DeadlockErr(o lockmgr.Owner, k lockmgr.Key) error {
	return fmt.Errorf("%w: owner %s was wounded by an older transaction, waiting for rule %q key %q",
		lockmgr.ErrDeadlock, o, k.Rule, k.Name)
}
