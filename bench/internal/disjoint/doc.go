// Package disjoint is the "disjoint" benchmark scenario: clients each
// update their own row (no contention at all) with a keyed autocommit
// UPDATE guarded by a lock rule, through 1, 2 and 4 lockproxy instances
// (Redis backend) and directly, interleaved, beside two floors through one
// instance: no rule on the table (the relay's own cost) and the lock rule
// on the in-memory lock backend (a lock service that costs nothing). On a
// small machine it measures what a guarded statement costs, not how
// lockproxy scales.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package disjoint
