package lockmgr

import "context"

// Observer is implemented by Lockers whose lock service can answer observe
// mode's question, "would this owner have had to wait for these keys?", in
// one round trip, without taking a lock, waiting for one, or making anyone
// wait.
//
// Observe notes owner on each key beside the key's lock, never in it:
// enforcing owners neither see the notes nor wait for them. Owners that
// observe one key at the same time, on any instance sharing the service,
// see each other's notes in the order they were made, as they would queue
// for the lock itself. A note lasts until EndObserve, or until the
// Locker's lease ttl has passed since owner's last Observe of the key, so
// an instance that dies leaves nothing behind for longer than that.
//
// Both methods are safe for concurrent use.
type Observer interface {
	// Observe notes owner on keys and returns, per key name, the other
	// owners (Owner.ID) in its way: the owner the key's lock is held by or
	// granted to, then the owners whose notes on it came before owner's
	// and still stand, oldest note first. A key no other owner holds or
	// noted before owner is absent. A key owner noted before keeps its
	// note's place; its ttl starts again. The caller should pass a
	// deadline; Observe never waits for a lock, whatever the answer.
	Observe(ctx context.Context, owner Owner, keys []Key) (map[string][]string, error)
	// EndObserve takes owner's notes off keys. Notes that are gone
	// already (ended, expired) are no error.
	EndObserve(ctx context.Context, owner Owner, keys []Key) error
}
