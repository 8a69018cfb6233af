// Package locktest is the conformance suite every lockmgr backend passes:
// mutual exclusion under contention across Lockers, all-or-nothing multi-key
// grants, reentrancy through lockmgr.Set, lease expiry of a vanished holder,
// renewal of a long holder, release safety, cancellation, FIFO-by-age
// fairness, wound-wait deadlock prevention (also for transactions that take
// their keys one Acquire at a time), and (where the backend can be
// restarted) no double grant across a lock-service restart, (where the
// backend carries them, lockmgr.SchemaAnnouncer) schema-change
// announcements heard by the other Lockers, and observe mode's Observer
// (holders named without waiting, observers in order, notes that end).
//
// It imports only lockmgr and the standard library, and must never import a
// backend or another lockproxy package.
package locktest
