// Package disjoint is the "disjoint" benchmark scenario: clients each
// update their own row (no contention at all) with a keyed autocommit
// UPDATE guarded by a lock rule, through 1, 2 and 4 lockproxy instances
// (Redis backend) and directly, interleaved. On a small machine it measures
// what a guarded statement costs, not how lockproxy scales.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package disjoint
