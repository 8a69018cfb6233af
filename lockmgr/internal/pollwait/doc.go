// Package pollwait is the lock engine shared by the lockmgr backends whose
// service cannot notify a waiter when a lock becomes free (mysqllock: a lock
// table; redlock: several independent Redis servers). A backend supplies a
// Store (try, release, renew, wounded check against its service); pollwait
// does everything else the lockmgr.Locker contract asks for: all-or-nothing
// multi-key acquire in sorted order, local wait queues ordered by
// transaction age (only the head of a key talks to the service), jittered
// backoff bounded by the holder's remaining lease and the caller's deadline,
// wound-wait bookkeeping, lease validity from the monotonic clock, batched
// renewal every ttl/3 and lease loss.
//
// The local queues, wound-wait state, lease bookkeeping and renewal loop
// are leasebook's (shared with redislock); pollwait adds the polling wait
// and the Store protocol.
//
// It imports only lockmgr and the leaf lockmgr/internal/leasebook among
// lockproxy packages and must never import a backend or another lockproxy
// package.
package pollwait
