// Package etcdlock is the etcd lock backend of lockproxy (etcd v3 API,
// go.etcd.io/etcd/client/v3), modelled on etcd's own concurrency.Mutex.
//
// Each Locker keeps one etcd lease (its session), granted with the
// configured ttl and kept alive by one goroutine every ttl/3 with
// KeepAliveOnce. Validity is measured on the monotonic clock from before the
// grant or keep-alive request was sent, less a drift margin. A keep-alive
// that finds the lease gone (expired or revoked), or validity running out
// without a successful keep-alive, loses every lease of that session
// (Done closed, Err wraps lockmgr.ErrLeaseLost); the next Acquire grants a
// new session.
//
// Per lock key K (path-escaped) and Prefix P:
//   - P/lock/K/<lease>-<seq>  one entry per waiter or holder, attached to the
//     session lease; value: owner id, owner age, Locker id, lease ttl
//   - P/wound/<locker>/<owner> marks a transaction wounded (attached to the
//     wounded owner's lease, so it never outlives that Locker)
//   - P/schema  put by every schema-change announcement (value: the
//     announcing Locker's id); each Locker watches it from the revision it
//     last saw, so a put made while etcd was away reaches it when etcd
//     answers again (lockmgr.SchemaAnnouncer)
//   - P/observe/K/<owner>    observe mode's note of an owner on K
//     (lockmgr.Observer), attached to the observing Locker's session
//     lease; never read by Acquire
//
// Acquire puts its entry and reads the key's entries in one transaction; the
// entry with the smallest create revision holds the lock, the others wait in
// create-revision order (FIFO). A waiter watches only the deletion of the
// entry just before its own (no thundering herd). The create revision of the
// own entry is the fencing token: etcd revisions only grow, across keys,
// releases, leader changes and restarts. An uncontended acquire plus release
// is two round trips. Multi-key requests take keys one by one in sorted order
// and give back everything on failure.
//
// Deadlocks are prevented by wound-wait (see package lockmgr): a waiter that
// finds a younger transaction ahead of it (holder or waiter) puts that
// owner's wound key. Each Locker watches its own wound prefix; a wounded
// owner's wait fails with lockmgr.ErrDeadlock at once, and so does its next
// wait (the acquire transaction also reads the owner's wound key, so a lost
// watch event costs nothing). Since queues are FIFO rather than ordered by
// age, an older waiter also wounds younger waiters ahead of it: an older
// transaction thus only ever waits for older ones or for work that ends
// without waiting.
//
// A waiter that becomes first after entries ahead of it vanished together
// with their lease (expired or revoked, not released) waits one more ttl
// before it takes the lock, so that the vanished holder's own validity
// deadline has surely passed: never two valid holders, even when an operator
// revokes a lease. The price: the keys of a crashed instance are free about
// two ttls after its last keep-alive, not one (etcd reports an expired and
// a revoked lease alike). Close therefore lets its lease expire instead of
// revoking it, after releasing what it holds.
//
// Cancellation and failed waits delete the own entry on a fresh bounded
// context. An unreachable etcd fails Acquire with lockmgr.ErrUnavailable
// after OpTimeout.
//
// The package imports only lockmgr, lockmgr/internal/leasebook and
// lockmgr/internal/schemaword (the bookkeeping it shares with the other
// backends) among lockproxy packages and must never import another.
package etcdlock
