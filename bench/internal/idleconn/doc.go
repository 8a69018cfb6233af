// Package idleconn is the "idleconn" benchmark scenario: N client
// connections log in through one lockproxy, run one statement each and
// stay open and idle; lockproxy's resident memory (VmRSS) and the Go
// runtime's heap, stacks and goroutines (from its /metrics) are read
// before, while the connections are open, and after they are closed, so
// the report gives lockproxy's memory per idle connection and whether it
// gives the memory back.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package idleconn
