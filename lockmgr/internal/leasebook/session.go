package leasebook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// The types below are for the backends whose locks live as long as one
// service session that a single keep-alive keeps (etcdlock: a lease;
// zklock: a ZooKeeper session). They hold no lock of their own: the
// backend guards them with one mutex of its own (called mu below), which
// the methods that need it take as an argument.

// Member is the lease side of one Acquire that runs on a Session: its
// owner, the Keeper once the lease exists, and whether it was lost or
// released. Owner is fixed; the rest is guarded by mu.
type Member struct {
	// Owner is the transaction the lease is for.
	Owner lockmgr.Owner

	keeper   *lockmgr.Keeper
	lost     error
	released bool
}

// Session is one service session and the leases (Members) it carries.
// Done is closed when it is lost; the rest is guarded by mu.
type Session struct {
	done chan struct{}

	validUntil time.Time // monotonic
	lost       error
	members    map[*Member]struct{}
}

// NewSession makes a live Session known valid until validUntil.
func NewSession(validUntil time.Time) *Session {
	return &Session{done: make(chan struct{}), validUntil: validUntil, members: map[*Member]struct{}{}}
}

// Done is closed when the session is lost.
func (s *Session) Done() <-chan struct{} { return s.done }

// ValidUntil is the session's validity deadline. Caller holds mu.
func (s *Session) ValidUntil() time.Time { return s.validUntil }

// Busy reports whether the session is live and carries leases. Caller
// holds mu.
func (s *Session) Busy() bool { return s.lost == nil && len(s.members) > 0 }

// Join makes m run on s; if s is lost already, so is m. Caller holds mu.
func (s *Session) Join(m *Member) {
	if s.lost != nil {
		m.lost = s.lost
		return
	}
	s.members[m] = struct{}{}
}

// Extend moves the validity of s and of every lease it carries to until,
// if that is later and s is not lost. Caller holds mu.
func (s *Session) Extend(until time.Time) {
	if s.lost != nil || !until.After(s.validUntil) {
		return
	}
	s.validUntil = until
	for m := range s.members {
		if m.keeper != nil {
			m.keeper.Extend(until)
		}
	}
}

// End marks s lost with cause and closes Done. It returns the members to
// lose (with Member.Lose, after mu is let go), and false if s was lost
// already. Caller holds mu.
func (s *Session) End(cause error) ([]*Member, bool) {
	if s.lost != nil {
		return nil, false
	}
	s.lost = cause
	close(s.done)
	members := make([]*Member, 0, len(s.members))
	for m := range s.members {
		members = append(members, m)
	}
	return members, true
}

// Lose ends s with cause, runs forget under mu if it ended now (so the
// backend stops using it as its current session), then loses every lease
// it carried (Member.Lose). It takes mu.
func (s *Session) Lose(mu *sync.Mutex, cause error, log *zap.Logger, forget func()) {
	mu.Lock()
	members, ok := s.End(cause)
	if ok {
		forget()
	}
	mu.Unlock()
	for _, m := range members {
		m.Lose(mu, cause, log)
	}
}

// Release marks m released and takes it off s (nil: not on a session yet);
// false if it was released already. Caller holds mu.
func (m *Member) Release(s *Session) bool {
	if m.released {
		return false
	}
	m.released = true
	if s != nil {
		delete(s.members, m)
	}
	return true
}

// Lose marks m lost with cause (unless lost or released already); its
// lease, if it exists, ends with ErrLeaseLost and log gets a warning. It
// takes mu.
func (m *Member) Lose(mu *sync.Mutex, cause error, log *zap.Logger) {
	mu.Lock()
	if m.lost != nil || m.released {
		mu.Unlock()
		return
	}
	m.lost = cause
	keeper := m.keeper
	mu.Unlock()
	if keeper != nil && keeper.Lose(cause) {
		log.Warn("lock lease lost", zap.String("owner", m.Owner.ID()), zap.Error(cause))
	}
}

// AttachSession ends a successful acquire of keys with fences by m on s:
// it makes the Lease (released by release) valid as long as s, and hands
// its Keeper to s. If m was lost meanwhile, the lease is released again on
// a context from fresh and the error is lockmgr.ErrClosed (the Locker
// closed) or wraps lockmgr.ErrLeaseLost. It takes mu.
func AttachSession(mu *sync.Mutex, m *Member, s *Session, keys []lockmgr.Key, fences []uint64,
	ledger *lockmgr.Ledger, release func(context.Context) error,
	fresh func() (context.Context, context.CancelFunc)) (*lockmgr.Lease, error) {
	mu.Lock()
	validUntil := s.validUntil
	mu.Unlock()
	lease, keeper := lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner: m.Owner, Keys: keys, Fences: fences, ValidUntil: validUntil,
		Release: release, Ledger: ledger,
	})
	// From here on the session talks to the keeper; a loss before that is
	// reported as the error of this Acquire.
	mu.Lock()
	lostErr := m.lost
	if lostErr == nil {
		m.keeper = keeper
		keeper.Extend(s.validUntil)
	}
	mu.Unlock()
	if lostErr != nil {
		ctx, cancel := fresh()
		defer cancel()
		_ = lease.Release(ctx)
		if errors.Is(lostErr, lockmgr.ErrClosed) {
			return nil, lockmgr.ErrClosed
		}
		return nil, fmt.Errorf("%w: while acquiring: %w", lockmgr.ErrLeaseLost, lostErr)
	}
	return lease, nil
}

// Owners is wound-wait bookkeeping per transaction (by owner id) of a
// session backend. The zero value is not usable: see NewOwners. Guarded by
// mu.
type Owners struct {
	m map[string]*OwnerState
}

// OwnerState is one transaction's wound-wait state.
type OwnerState struct {
	refs    int           // acquires in progress plus leases held
	wounded chan struct{} // closed when an older transaction wounds it
}

// NewOwners makes an empty Owners.
func NewOwners() Owners { return Owners{m: map[string]*OwnerState{}} }

// Ref counts one more acquire of owner id and returns its state. Caller
// holds mu.
func (o Owners) Ref(id string) *OwnerState {
	st := o.m[id]
	if st == nil {
		st = &OwnerState{wounded: make(chan struct{})}
		o.m[id] = st
	}
	st.refs++
	return st
}

// Unref counts one acquire or lease of owner id less. It reports whether
// that was the last one and the owner had been wounded (then its wound
// mark at the service can go). Caller holds mu.
func (o Owners) Unref(id string) (lastWounded bool) {
	st := o.m[id]
	if st == nil {
		return false
	}
	st.refs--
	if st.refs == 0 {
		delete(o.m, id)
		return st.IsWounded()
	}
	return false
}

// Wound marks the local owner with id wounded, failing its wait. Unknown
// ids are ignored. Caller holds mu.
func (o Owners) Wound(id string) {
	if st := o.m[id]; st != nil {
		select {
		case <-st.wounded:
		default:
			close(st.wounded)
		}
	}
}

// Wounded is closed when an older transaction wounds the owner.
func (st *OwnerState) Wounded() <-chan struct{} { return st.wounded }

// IsWounded reports whether the owner was wounded.
func (st *OwnerState) IsWounded() bool {
	select {
	case <-st.wounded:
		return true
	default:
		return false
	}
}
