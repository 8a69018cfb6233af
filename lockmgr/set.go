package lockmgr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Set is the locks one client session holds for its current transaction:
// it makes re-acquiring a held key free (reentrancy) and releases everything
// at transaction end. It is safe for concurrent use, though a session uses it
// from one goroutine.
type Set struct {
	locker Locker

	mu     sync.Mutex
	owner  Owner
	leases []*Lease
	held   map[string]*Lease
}

// NewSet makes an empty Set that acquires from locker for owner.
func NewSet(locker Locker, owner Owner) *Set {
	return &Set{locker: locker, owner: owner, held: map[string]*Lease{}}
}

// Owner is the owner the Set acquires for.
func (s *Set) Owner() Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner
}

// Begin starts a new transaction for owner. The Set must be empty (call
// Release first); it returns false, changing nothing, otherwise.
func (s *Set) Begin(owner Owner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.leases) > 0 {
		return false
	}
	s.owner = owner
	return true
}

// Acquire takes the keys of keys not already held, as one lease (all or
// nothing). Keys already held cost nothing. It fails with the error wrapping
// ErrLeaseLost of a lease of this Set that was lost, without acquiring.
func (s *Set) Acquire(ctx context.Context, keys []Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lostLocked(); err != nil {
		return err
	}
	var missing []Key
	for _, k := range keys {
		if _, ok := s.held[k.Name]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	l, err := s.locker.Acquire(ctx, s.owner, missing)
	if err != nil {
		return err
	}
	s.leases = append(s.leases, l)
	for _, k := range l.Keys() {
		s.held[k.Name] = l
	}
	return nil
}

// Holds reports whether key is held by the Set.
func (s *Set) Holds(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.held[key]
	return ok
}

// Len is the number of keys held.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Fence is the fencing token of key, 0 if not held.
func (s *Set) Fence(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.held[key]; l != nil {
		return l.Fence(key)
	}
	return 0
}

// Err is nil while every lease is held, else the first lease-lost error.
func (s *Set) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostLocked()
}

func (s *Set) lostLocked() error {
	for _, l := range s.leases {
		if err := l.Err(); err != nil && !errors.Is(err, ErrReleased) {
			return err
		}
	}
	return nil
}

// Valid reports whether every lease is held and known valid now: the
// proxy's test before sending COMMIT. An empty Set is valid.
func (s *Set) Valid() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now() // once: a transaction holds a lease per keyed statement
	for _, l := range s.leases {
		if !l.validAt(now) {
			return false
		}
	}
	return true
}

// ValidUntil is the earliest validity deadline of the Set's leases, the
// zero Time if the Set is empty or a lease has ended.
func (s *Set) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var min time.Time
	for i, l := range s.leases {
		v := l.ValidUntil()
		if v.IsZero() {
			return time.Time{}
		}
		if i == 0 || v.Before(min) {
			min = v
		}
	}
	return min
}

// LastValidUntil is the latest validity deadline of the Set's leases: how
// long one of its locks may still be held. The zero Time for an empty Set
// or one whose leases have all ended.
func (s *Set) LastValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, l := range s.leases {
		if v := l.ValidUntil(); v.After(last) {
			last = v
		}
	}
	return last
}

// Release releases every lease and empties the Set, even when a backend
// release fails (those locks then expire with their lease). It returns the
// joined release errors.
func (s *Set) Release(ctx context.Context) error {
	s.mu.Lock()
	leases := s.leases
	s.leases, s.held = nil, map[string]*Lease{}
	s.mu.Unlock()
	return releaseLeases(ctx, leases)
}

// ReleaseLocal releases each lease of the Set whose release needs no wait
// for the lock service, and drops it: it passes to the next owner of the
// same Locker waiting for its keys in this process, or its release is
// queued by the backend (Lease.ReleaseLocal). It reports whether that was
// every lease; on false the Set holds the others, to be released as
// usual (Release), and nothing changed for them.
func (s *Set) ReleaseLocal() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.leases[:0]
	for _, l := range s.leases {
		if !l.ReleaseLocal() {
			kept = append(kept, l)
			continue
		}
		for _, k := range l.Keys() {
			if s.held[k.Name] == l {
				delete(s.held, k.Name)
			}
		}
	}
	clear(s.leases[len(kept):])
	s.leases = kept
	return len(kept) == 0
}

// Detach empties s and returns what it held as a new Set of the same
// owner, for the caller to release apart (in the background, say) while s
// goes on to the next transaction. Until that release has returned, the
// backend may still hold those keys: a caller that acquires them again
// through s waits for it first, or waits on the backend.
func (s *Set) Detach() *Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &Set{locker: s.locker, owner: s.owner, leases: s.leases, held: s.held}
	s.leases, s.held = nil, map[string]*Lease{}
	return d
}

// HandOver passes the lease holding key, when it is the Set's only lease
// and holds that key alone, to owner to (Lease.HandOver) and drops it
// from the Set; the caller gives the returned lease to to's Set (Adopt).
// False, changing nothing, when the Set holds more or the backend does
// not pass it: the caller then releases the Set as usual.
func (s *Set) HandOver(key string, to Owner) (*Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.leases) != 1 || len(s.held) != 1 || s.held[key] == nil {
		return nil, false
	}
	next, ok := s.leases[0].HandOver(to)
	if !ok {
		return nil, false
	}
	s.leases, s.held = nil, map[string]*Lease{}
	return next, true
}

// OnWanted registers f with every lease of the Set (Lease.OnWanted): it
// runs when the lock service says an owner of another Locker waits for a
// key the Set holds, once per lease that hears it. False when one of them
// has heard it already (what was registered with the others stays).
func (s *Set) OnWanted(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		if !l.OnWanted(f) {
			return false
		}
	}
	return true
}

// Waited reports whether another owner of the same Locker, in this
// process, waits for a key the Set holds (Lease.Waited).
func (s *Set) Waited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		if l.Waited() {
			return true
		}
	}
	return false
}

// Adopt adds l, a lease handed over to the Set's owner (HandOver), to the
// Set, which releases it with the rest. It fails, adding nothing, when l
// is another owner's or holds a key the Set holds already.
func (s *Set) Adopt(l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Owner() != s.owner {
		return fmt.Errorf("lockmgr: a lease of %s adopted by %s", l.Owner(), s.owner)
	}
	for _, k := range l.Keys() {
		if s.held[k.Name] != nil {
			return fmt.Errorf("lockmgr: adopted key %q is held already", k.Name)
		}
	}
	s.leases = append(s.leases, l)
	for _, k := range l.Keys() {
		s.held[k.Name] = l
	}
	return nil
}

// releaseLeases releases each of leases and joins their errors. The
// leases are released at the same time, not one after another: a
// backend that sends the calls made at one moment together (redislock's
// batches) then gives back a transaction's leases, one per statement, in
// one or two round trips instead of a round trip each.
func releaseLeases(ctx context.Context, leases []*Lease) error {
	switch len(leases) {
	case 0:
		return nil
	case 1:
		return leases[0].Release(ctx)
	}
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases[1:] {
		wg.Go(func() { errs[i+1] = l.Release(ctx) })
	}
	errs[0] = leases[0].Release(ctx)
	wg.Wait()
	return errors.Join(errs...)
}

// Mark is the Set's position now: the leases acquired after it are the
// ones taken since, which ReleaseSince gives back.
func (s *Set) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leases)
}

// ReleaseSince releases the leases acquired after mark (see Mark) and keeps
// the others: what one statement took that the transaction did not hold
// before it. Keys held before mark stay held, since Acquire takes only
// keys the Set does not hold. It returns the joined release errors.
func (s *Set) ReleaseSince(ctx context.Context, mark int) error {
	s.mu.Lock()
	if mark < 0 || mark >= len(s.leases) {
		s.mu.Unlock()
		return nil
	}
	leases := append([]*Lease(nil), s.leases[mark:]...)
	s.leases = s.leases[:mark:mark]
	for _, l := range leases {
		for _, k := range l.Keys() {
			if s.held[k.Name] == l {
				delete(s.held, k.Name)
			}
		}
	}
	s.mu.Unlock()
	return releaseLeases(ctx, leases)
}
