// Package lockmgr defines how lockproxy takes distributed row locks: the
// Locker interface every lock backend implements, the Lease a grant returns
// (validity from the monotonic clock, fencing tokens, loss notification), the
// per-session Set that makes re-acquiring a held key free, the sentinel errors
// the proxy maps to MySQL errors, the Prometheus metrics and the Ledger behind
// /debug/locks, and Observer, which every backend also implements: observe
// mode's question, who is in the way of these keys, asked of the lock
// service without taking or waiting for a lock.
//
// Backends live in subpackages and import only this package and
// lockmgr/internal: redislock (one Redis server, Sentinel or Cluster),
// redlock (a majority of independent Redis servers), mysqllock (rows of an
// InnoDB table), etcdlock (etcd leases and revisions), zklock (ZooKeeper
// ephemeral sequential znodes) and memlock (one process only). locktest is
// the conformance suite they all pass.
//
// Deadlocks are prevented, not detected, by wound-wait on transaction age:
// every Owner carries its transaction's start time. A waiter never waits
// behind a younger waiter (queues are ordered by age), and a waiter that
// finds the key held by a younger transaction wounds it. A wounded owner may
// finish what it is doing, but the next time it would have to wait for a
// lock, or if it is already waiting, its Acquire fails with ErrDeadlock, so
// the proxy rolls its transaction back and releases its locks. An older
// transaction therefore only ever waits for work that ends without waiting,
// and no cycle can form. Lock backends must implement this rule.
//
// This package must never import another lockproxy package (not proxy,
// rules, parser, router, nor its own backends).
package lockmgr
