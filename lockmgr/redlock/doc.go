// Package redlock is the Redlock lock backend of lockproxy
// (locks.redis.mode: redlock): a lock is held when a majority of several
// independent Redis servers (no replication between them, N ≥ 3) grant it
// to the same holder token.
//
// Per server and lock key K the layout is that of package redislock (hash
// tag {K}): lockproxy:{K} (hash: holder token, owner id and age, fence,
// wounded flag; PEXPIRE ttl), lockproxy:{K}:q and :qx (waiter tickets by
// owner age, with expiry), lockproxy:{K}:fence (per-server counter). The
// scripts run on each server independently and this package counts the
// votes: the try script is redislock's acquire script (acquire.lua of
// lockmgr/internal/grantscript, run without a wound channel, so a wound is
// only the flag renewal reads), then release.lua, renew.lua, queue.lua.
// Observe mode's notes (lockmgr.Observer) sit beside each server's lock in
// lockproxy:{K}:o (observe.lua of grantscript); a majority names who is in
// an observer's way.
//
// Acquire sends the try script to every server at once with the same
// token. It succeeds when a majority granted and the validity window is
// still open: validity = ttl − elapsed − drift, measured on this process's
// monotonic clock from before the requests were sent, drift = 1% of the
// ttl + 2ms. Otherwise the servers that did grant are given back (keeping
// the waiter's ticket) and the head waiter tries again after a jittered
// backoff (there is no wake-up across servers), never sleeping past the
// holder's remaining lease, the context's deadline or MaxPoll. When more
// servers fail than a majority can spare, Acquire fails with
// lockmgr.ErrUnavailable. Leases are renewed on every server by one
// goroutine per Locker every ttl/3; a lease is lost when a key is no
// longer ours on enough servers to make a majority, or when validity runs
// out before a majority renewed it. While a lease is valid, renewal also
// writes the key back on a server that lost it (restart without
// persistence, or a grant that did not land), so the lock again survives
// the loss of a server; a restore that lands after the lease's release is
// given back at once. Release is compare-and-delete on every server. Try
// returns as soon as a majority granted; a slower server's late grant is
// kept (renewed and released like the others).
//
// Fencing token: the maximum over the granting majority of the per-server
// counters, each of which is max(previous+1, server time in µs); a release
// raises the counters of every server it reaches to the fence granted. Two
// majorities always share a server, so a grant made after an earlier
// holder released (or after its lease ran out, by the time seed) gets a
// larger token. This is NOT a strict total order under failures: a server
// that restarts without persistence forgets its counter and its lock (its
// time seed is all that is left), clocks that step backwards weaken the
// seed, and a release that reached only some servers leaves the others
// behind; a holder paused past its validity can still act with an old
// token while a new holder acts with a new one. Redlock, like any lease,
// needs the protected resource to check fences for real safety; see the
// Redlock debate (Kleppmann vs. antirez). Restarted servers are not held
// back for a ttl here ("delayed restart"), so run them with persistence
// or restart them no sooner than one ttl after they stopped.
//
// Deadlocks are prevented by wound-wait (package lockmgr): the try script
// marks a younger holder wounded; the holder's next wait checks its rows
// and fails with lockmgr.ErrDeadlock; renewal reports the flag too.
//
// The package imports only lockmgr and its internal engine and bookkeeping
// (lockmgr/internal/pollwait, lockmgr/internal/leasebook) among lockproxy
// packages and must never import another.
package redlock
