// Package redislock is the Redis lock backend of lockproxy: one server,
// Sentinel or Cluster through redis.UniversalClient.
//
// Per lock key K (hash tag {K}, so a cluster keeps it on one slot):
//   - lockproxy:{K}        hash: holder token, owner id and age, the holder
//     Locker's wound channel, the fence granted, the wounded flag; PEXPIRE
//     ttl. Or, while a fast-path holder nobody else asked for has it, the
//     string #tok ':' tok #own ':' own age ':' fence ':' wound channel
//     (see below). Or, while waiters are queued and none holds it, a hash
//     without holder (field r): the reservation a release leaves them
//   - lockproxy:{K}:q      ZSET of waiter tickets ordered by owner age (FIFO
//     by transaction start); only the head may take a free lock
//   - lockproxy:{K}:qx     ZSET ticket -> expiry, so a vanished waiter
//     leaves the queue
//   - lockproxy:{K}:qg     hash ticket -> owner id and wound channel of the
//     ticket's Locker: what a release needs to grant the key to it; only
//     tickets of Lockers that hear the key's announcements have one. The
//     field '>' ticket names that Locker's next local waiter (ticket, age,
//     owner id), whom a release granting the ticket queues in the same
//     script, as the acquire script does when it grants, so that instance
//     keeps its place by age ahead of younger waiters elsewhere
//   - lockproxy:{K}:fence  fencing counter: max(previous+1, server time in
//     µs), so it only grows even when the counter key expires or a server
//     restart loses it
//   - lockproxy:{K}:wake   Pub/Sub channel; a release that frees the key
//     for queued waiters announces its grant there ('g' fence ' ' ticket),
//     or wakes them ('r') when it granted nothing
//   - lockproxy:{K}:o      hash owner id -> when it first noted the key and
//     when its note ends: observe mode's notes (lockmgr.Observer), never
//     read by the lock's own scripts; PEXPIRE ttl
//
// Acquire, release and renew are Lua scripts that check the holder token
// (acquire.lua of lockmgr/internal/grantscript, shared with redlock;
// release.lua, renew.lua); release is compare-and-delete and idempotent. An
// uncontended Acquire plus Release is two round trips, and only the first
// is on the client's path (lockproxy releases after the answer).
//
// The fast path (fast.go), for a key whose rule does not fence writes
// (lockmgr.Key.NoHandoff false): the first ask is one SET NX PX of the
// string above, no script; the release is the release script's first
// branch, GET and DEL of that string when it is still ours. That is 4
// Redis commands for an uncontended statement, the EVALSHA included
// (INFO commandstats), the seeds' lock exactly. Everything the contended
// machinery needs of the holder is in the string: its token (release and
// renewals compare it), owner id and age (wound-wait), wound channel, and
// a fence taken from the instance's clock (µs, above the last this process
// gave): such a fence is not written anywhere, it only has to grow, and it
// does as far as the instances' clocks agree. A SET NX that finds the key
// taken goes on to the acquire script, which turns the string into the
// hash with the lease it has left, carries its fence into the key's
// counter (so every grant after it has a higher one), and then queues,
// wounds and grants as for any holder; its release, renewal and the
// observe script read either form. While waiters are queued the key is
// not free for a SET NX: a release that frees it grants it to the oldest
// waiter in the same script, or, when it cannot (that waiter's Locker does
// not hear announcements, or the release grants nothing), leaves the
// reservation, which the acquire script grants to the head of the queue
// like a free key and which lasts a ticket's lifetime or until the queue
// is empty. One window is left: a holder whose lease runs out (a vanished
// or stalled instance) leaves the key free until its waiters ask again
// (they sleep no longer than the lease they saw left), and a SET NX in
// that moment takes it ahead of them; wound-wait still orders it against
// them, and its release, a plain compare-and-delete, wakes nobody: the
// waiters ask at their next wait slice. A key whose rule fences writes
// never takes the fast path: its fences come from the server (next
// paragraph), and the queue is always seen.
//
// The script's path for a key nobody contends: when neither
// the lock nor the wait queue exists (so no ticket expiry or grants
// entry either), the acquire script takes the key with owner, fence and
// lease and notes nothing else (EXISTS, TIME, one SET ... GET for the
// fence counter, HSET, PEXPIRE); when the queue does not exist the release
// script compares and deletes (EXISTS, HGET, DEL) and announces nothing.
// That is 10 Redis commands for an uncontended statement of a fenced
// rule, scripts included, against 21 through the queue's bookkeeping. The
// queue, wound-wait and grant machinery below starts as soon as a key has
// a holder when asked for, or a waiter; the fence is computed the same
// way on both paths, so it grows across the switch. A multi-key Acquire
// (an IN list, a multi-row INSERT) first asks for all its keys in one
// pipeline without queueing (free.go: SET NX for the keys of rules
// without a fence, the script for the others): one round trip takes
// every key nobody contends, and only the others are waited for one by
// one.
// Its release is one script call for all its keys (release_many.lua,
// release.lua's function for each; one per 64 keys, so that no script
// holds the server up for long), and so is each renewal of it
// (renew_many.lua); on a Cluster, where each key has its own slot, they
// are one call per key, in one pipeline.
//
// Across sessions (batch.go): the releases that sessions of one Locker
// make while another is on its way go together in the next pipeline, sent
// as soon as that one is answered (group commit): no timer, no wait when
// nothing else is on its way, and concurrent sessions share one write and
// one read per batch. The fast path's acquires (SET NX) of concurrent
// sessions are batched the same way, apart from the releases (an
// acquire never waits behind a batch of releases). With
// Options.ReleaseWindow, the release of a lease whose keys were free
// when asked for and never waited for waits
// up to that long for the Locker's next acquire (or observe) and goes in
// its pipeline, ahead of it; else it is sent alone when the window ends,
// or at once when an owner of any Locker waits for one of its keys (a
// waiter of another Locker queued behind it says so on the holder's wound
// channel). The caller's Release returns when the release is held. A
// later acquire takes what is held into its own pipeline, ahead of its
// calls, but does not wait for a held release already on its way alone
// (a release deletes only its own token, harmless whenever it lands; an
// acquire of one of its keys that gets there first waits as for any
// holder, until the release grants it the key or wakes it); an observe
// does wait for it (else it would see the Locker's own released key in
// the way).
//
// A release that frees a key other waiters are queued for grants it, in the
// same script, to the oldest live ticket when that one has a grants entry
// (it was queued by a Locker subscribed to the key's channel, so the
// announcement reaches it; otherwise the waiters are woken to ask), as the
// acquire script would (new fence, the ticket's owner in the hash), but for
// a short lease, the ticket's own lifetime (4 wait slices): a grant to a
// waiter that died with its ticket queued holds the key no longer than that
// ticket would have kept others waiting. The waiter takes the grant from
// the announcement without a round trip of its own (renewing it to the TTL
// if it still holds it halfway), only when it can prove the announcement
// fresh: the fence is above the mark (fence counter and server time) its
// last miss saw, no connection was made since that miss, and the restart
// guard is not holding grants back. Its validity then runs from the moment
// that miss was sent, which was before the grant. Otherwise it asks, and
// the acquire script answers "already yours" with the lease left. A waiter
// of the releasing Locker learns of its grant from the release's reply. A
// key crossing between instances thus stays idle for one round trip and a
// message, not two round trips. A grant to a ticket of a Locker that no
// waiter or lease of that Locker claims any more (the next local waiter a
// ticket named has left since, having taken the key by another path or
// given up) is given back by that Locker as soon as it hears of it, so the
// key goes on to the next waiter rather than staying granted to nobody for
// the grant's lease.
//
// Inside one Locker, local waiters for a key queue in process (ordered by
// transaction age) and only the head talks to Redis: it subscribes to the
// key's channel, waits for the subscription to be confirmed, retries, and
// then sleeps until a wake-up, never longer than the holder's remaining
// lease or the wait slice (which also refreshes its ticket). When the head
// is granted, the same script call queues the ticket of the next local
// waiter, so the instance keeps its place in the key's queue while that
// waiter is still being scheduled; a wait that then fails removes the
// ticket like its own. A release that gives a key back to Redis while
// waiters are queued for it likewise queues its Locker's local head
// waiter for that key, with its own age, before it picks whom to grant
// (release.lua), so a head that has not asked yet (it waited in process
// behind its own Locker's lease, or became head while the key went
// through other Lockers) is not passed by younger waiters elsewhere.
//
// With Options.LocalHandoffs, a single-key lease released while a local
// waiter wants that key alone passes to it without Redis (lock cohorting,
// see leasebook's handoff.go): Redis keeps the grant under the first token
// and owner, the receiver inherits the recorded age when it is older. Only
// waiters queued before Redis's grant are handed the lease; once the next
// one came later, after LocalHandoffs hand-offs in a row, or once
// LocalHandoffWindow has passed since Redis's grant, the release goes to
// Redis, whose queue orders every Locker's waiters by age. A lease passed
// on with Lease.HandOver (to an owner that did not wait: the next batch
// of a combined row, a statement taking over a lingering lock) meets the
// same bounds, but there the Locker first asks Redis to keep the key for
// another turn (keep.lua): when nobody else has asked for it since the
// grant (the fast path's lock string, no queue) Redis extends it and the
// turn starts again, one round trip instead of a release and an acquire. Across Lockers
// a key is then served in rounds rather than strictly by age. A local head behind a
// lease held by its own Locker waits for it in process (a hand-off wait
// without a ticket in Redis; another keeps its ticket fresh) and wounds a
// younger local holder itself. Keys marked lockmgr.Key.NoHandoff always go
// through Redis, each grant with a new fence.
//
// Deadlocks are prevented by wound-wait (see package lockmgr): the acquire
// script compares the waiter's age with the holder's; an older waiter marks
// the lock hash wounded and publishes the holder's token on the holder
// Locker's channel. That Locker fails the holder owner's current or next
// wait with lockmgr.ErrDeadlock. The renew script reports the wounded flag
// too, in case the message was lost.
//
// Leases are renewed by one goroutine per Locker, in one pipeline, every
// ttl/3. Validity is measured from before the request was sent, minus a
// drift margin. A renewal that finds the lock not ours, or validity running
// out without a successful renewal, loses the lease (Done closed, Err wraps
// lockmgr.ErrLeaseLost).
//
// A Redis server that restarted without persistence forgets its locks.
// Holders restore theirs at the next renewal when their lease is still valid
// on their own clock (renew.lua re-creates a missing lock, never one that
// someone else holds). Other Lockers must not grant before that: each
// counts the connections it dials, checks the server's uptime after a grant
// made while new connections appeared, and while the server is younger than
// RestartGrace (one ttl) undoes such grants and retries later. A key is
// thus never granted while a lease from before the restart may still be
// valid. The price: for one ttl after a Redis start, contended or not, no
// lock is granted.
//
// Eviction. A server with a maxmemory and any eviction policy but
// noeviction may drop a held lock key (lock keys carry a TTL, so the
// volatile policies too). Together with the uptime, the check after a
// grant made while connections were dialled reads INFO memory; from such a
// server the grant is undone and Acquire fails with lockmgr.ErrUnavailable
// saying why, at every grant until the policy is fixed (evict.go). Ready
// reports it for every master.
//
// Sentinel and Cluster. A Sentinel client asks the sentinels for the
// master at every dial. A Cluster client reloads its slot map whenever a
// call finds its node away or the cluster changing (cluster.go), not only
// on MOVED or once a minute as go-redis would. The restart guard sees only
// the ClusterClient's own dials, not its node clients' (go-redis keeps
// their hooks apart): on a Cluster it does not notice a node that
// restarted empty; the fence column covers that. After a master dies, grants resume once a replica is
// promoted: 3-5 s with a 2 s failure detection (TestFailoverRecovery; e2e
// TestFaultRedisFailover has the figures under a flash sale). Each lock key
// has its own hash tag, so keys spread over every master while the scripts'
// keys of one lock stay on one slot.
//
// The window asynchronous replication leaves: a grant (or the renewal
// that would restore it) the old master acknowledged may not have reached
// the replica that is promoted. The new master then has no such lock, and
// another Locker may grant the key before the holder's next renewal
// (within ttl/3) finds it taken and loses the lease (the client gets 1213,
// its transaction is rolled back). Until then two sessions believe they
// hold the key. Two things close it:
//   - The fence (a rule's fence column; its keys never take the fast
//     path). The new grant's token is max(previous+1, server time in
//     µs); the counter may be lost with the lock, but server time has moved
//     past the old token (masters' clocks must agree to within the time
//     between the two grants). With a rule's fence column, the write of
//     the holder with the older token is refused, so the row never takes
//     writes from both.
//   - The restart grace. A master that restarted empty, whether failed
//     over to or not, is younger than RestartGrace: grants on it wait until
//     leases from before have run out or been restored. A replica promoted
//     after running for long is not held back; that case is the fence's.
//
// The package imports only lockmgr and lockmgr/internal/leasebook (the
// bookkeeping it shares with the other backends) among lockproxy packages
// and must never import another.
package redislock
