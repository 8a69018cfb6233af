package lockmgr

import "context"

// Locker grants leases on keys. It is the one interface every lock backend
// implements and the proxy uses; all methods are safe for concurrent use.
type Locker interface {
	// Acquire takes every key for owner, all or nothing, in sorted key
	// order, waiting (fairly, without polling) until ctx's deadline. The
	// caller must pass a deadline (the rule's wait_timeout). Errors wrap
	// ErrWaitTimeout, ErrDeadlock, ErrUnavailable, ErrClosed or the
	// context's error. On error nothing is left held, even when the
	// backend granted the lock just as ctx ended.
	//
	// Acquire is not reentrant: a key the owner already holds through
	// another lease is waited for like any other. Sessions use a Set,
	// which skips keys already held.
	Acquire(ctx context.Context, owner Owner, keys []Key) (*Lease, error)
	// Snapshot lists what this Locker's callers hold and wait for.
	Snapshot() []Entry
	// Close releases every lease still held (best effort, bounded) and
	// stops background work. Acquire then fails with ErrClosed.
	Close() error
}

// SchemaAnnouncer is implemented by Lockers whose lock service carries a
// word between the instances that share it: one instance ran DDL, so the
// others re-read the schema now rather than at their next periodic read.
// An announcement a Locker cannot hear when it is made (its service away
// from it) is delivered when the service answers again where the service
// keeps a version (etcd, ZooKeeper, the MySQL lock table) and lost where
// it does not (Redis Pub/Sub); the periodic read stays the bound.
type SchemaAnnouncer interface {
	// AnnounceSchemaChange tells the other instances sharing the lock
	// service that the schema changed.
	AnnounceSchemaChange(ctx context.Context) error
	// SchemaChanges delivers a value when another instance announced a
	// change (changes that come while one is pending are merged).
	SchemaChanges() <-chan struct{}
}
