// Package redisrtt is the "redisrtt" benchmark scenario: it counts the
// Redis commands (round trips) one uncontended guarded autocommit UPDATE
// costs through lockproxy, from Redis's own `INFO commandstats` read before
// and after N statements on one connection, with the background rate of an
// idle instance subtracted; also per read-then-write transaction, and the
// statement's latency against the same statement sent directly.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package redisrtt
