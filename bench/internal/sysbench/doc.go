// Package sysbench runs the sysbench OLTP workloads against a MySQL address
// and parses their text report (throughput, latency, the latency histogram)
// into numbers.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmark talks to lockproxy over the wire only.
package sysbench
