// Package zklock is the ZooKeeper lock backend of lockproxy
// (github.com/go-zookeeper/zk), the classic lock recipe of ephemeral
// sequential znodes.
//
// Each Locker owns one ZooKeeper connection, and its session is the lease:
// every lock znode is ephemeral, so the server deletes it when the session
// expires. Validity is measured on the monotonic clock from before the last
// request the server answered on that session (an Acquire's own requests,
// and a heartbeat every ttl/3 while leases are held), plus the session
// timeout (the one the server negotiated, if lower than asked for), less a
// drift margin: the server cannot expire the session earlier. A session
// expiry event, or validity running out without an answer, loses every
// lease of the session (Done closed, Err wraps lockmgr.ErrLeaseLost); the
// client then opens a new session for later Acquires.
//
// Znodes under Root R (default /lockproxy):
//   - R/locks/<K>/lock-<age>-<locker>-<n>-<seq>  one ephemeral sequential
//     znode per waiter or holder of key K (path-escaped); K is a container
//     node, which the server removes when it has been empty for a while.
//     Data: owner id, owner age, Locker id. <age> is the owner's age in a
//     fixed-width, order-preserving form, so a waiter sees the ages of the
//     entries ahead of it from the names alone.
//   - R/wound/<locker>/<owner>  ephemeral; an older waiter wounds a younger
//     holder of Locker <locker>
//   - R/schema  persistent; every schema-change announcement sets its data
//     to the announcing Locker's id. Each Locker reads it with a watch and
//     again at every event, so a change made while ZooKeeper was away from
//     it shows as a version jump (lockmgr.SchemaAnnouncer)
//   - R/observe/<K>/<owner>-<seq>  ephemeral sequential: observe mode's
//     note of an owner on K (lockmgr.Observer), its sequence its place;
//     never read by Acquire
//
// The znode with the lowest sequence holds the lock; the others wait in
// sequence order (FIFO) and each watches only its predecessor (no herd).
// The fencing token is the czxid of the own znode: zxids are global to the
// ensemble and only grow (the epoch in the high 32 bits grows with every
// leader election), so they grow per key even when the key's container is
// removed and created again, which restarts its sequence numbers at zero. An
// uncontended acquire plus release is four requests, three round trips
// (create; the children list and the own znode's stat in parallel; delete).
// Multi-key requests take keys one by one in sorted order and give back
// everything on failure.
//
// Deadlocks are prevented by wound-wait (see package lockmgr), as in
// etcdlock: a waiter that finds a younger transaction holding its key
// creates that owner's wound znode. Each Locker watches its own wound
// directory, marks the owner wounded and deletes the znode; a wounded owner's
// current and next waits fail with lockmgr.ErrDeadlock. Queues are FIFO, not
// ordered by age; a waiter with a younger waiter ahead of it also watches
// the holder's znode, so it wounds that waiter as soon as it holds.
//
// Calls of the ZooKeeper client have no context; each is bounded by
// OpTimeout (the call goes on in the background and its result is dropped).
// An unreachable ZooKeeper fails Acquire with lockmgr.ErrUnavailable after
// OpTimeout. Cancellation and failed waits delete the own znode on a fresh
// bounded context, or every znode of the attempt's unique name prefix when
// the create's reply was lost.
//
// The package imports only lockmgr, lockmgr/internal/leasebook and
// lockmgr/internal/schemaword (the bookkeeping it shares with the other
// backends) among lockproxy packages and must never import another.
package zklock
