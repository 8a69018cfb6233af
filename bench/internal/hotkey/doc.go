// Package hotkey is the "hotkey" benchmark scenario: 64 clients loop the
// read-then-write transaction on ONE row for a fixed time, through two
// lockproxy instances (lock rule, Redis backend), against SELECT ... FOR
// UPDATE directly on MariaDB (and the same FOR UPDATE transaction through
// the bare Go relay, bench/cmd/relay: one extra hop inside the serialized
// critical section, the floor for any proxy) and against an
// application-side Redis lock (SET NX PX + 5 ms sleep-retry). It reports throughput and the latency
// (wait included) distribution, and how fairly the lock is handed from one
// waiter to the next as waiters (8/32/64) and instances (1/2) vary.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package hotkey
