// Package env is the benchmark suite's environment: the test bed (a MariaDB
// primary and replica and a Redis, started by scripts/testbed.sh), the
// lockproxy binary built from the checkout, lockproxy instances started
// from it as separate processes with generated configs on free loopback
// ports, and the relays that parse nothing (bench/cmd/relay and socat) put
// in front of the primary to show what any proxy costs on this host.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmark talks to lockproxy over the wire only.
package env
