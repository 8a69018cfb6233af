// Package workload is the soak's mixed load and its data: the bench_soak
// schema and the rules that guard it, the statement-cache primer, the
// clients (flash-sale buyers, replica readers, rewrite counters, full-table
// readers, a connection churner, an abandoner of open transactions), the
// Tally of what they did and the State the tables hold at the end.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package workload
