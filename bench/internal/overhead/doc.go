// Package overhead is the "overhead" benchmark scenario: sysbench OLTP
// workloads run directly against the primary and through one lockproxy (no
// rules, memory lock backend), interleaved round by round so that the noise
// of a shared machine falls on both alike, reported as medians and
// proxy/direct ratios.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package overhead
