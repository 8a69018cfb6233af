// Package env is the benchmark suite's environment: the test bed (a MariaDB
// primary and replica and a Redis, started by scripts/testbed.sh), the
// lockproxy binary built from the checkout, and lockproxy instances started
// from it as separate processes with generated configs on free loopback
// ports.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmark talks to lockproxy over the wire only.
package env
