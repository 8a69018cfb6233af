// Package overhead is the "overhead" benchmark scenario: sysbench OLTP
// workloads run directly against the primary, through one lockproxy (no
// rules, memory lock backend) and through two TCP relays that parse nothing
// (the bare Go relay bench/cmd/relay, and socat), interleaved round by
// round so that the noise of a shared machine falls on all alike, reported
// as medians and ratios to direct. The relays are the floor: what one extra
// loopback hop costs on this host, whatever the proxy does.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package overhead
