// Command waitplot runs a short lock-contention workload against a running
// lockproxy, scrapes its /metrics every second, and renders the lock wait
// quantiles over time (from the lockproxy_lock_wait_seconds histogram, as
// histogram_quantile would) to a PNG with gonum/plot. It also saves what an
// operator sees meanwhile: /debug/locks and SHOW LOCKPROXY LOCKS during
// the hot phase, and the lock series of /metrics at the end, so the
// examples in docs/ come from a real run. run.sh wires it to a test bed and
// a freshly built lockproxy:
//
//	docs/tools/waitplot/run.sh
//
// It is a documentation tool and a Go module of its own (go.mod beside
// this file), so its dependencies never enter lockproxy's build: nothing
// in lockproxy imports it, and it must never import lockproxy's own
// packages (it talks to lockproxy only over the MySQL protocol and HTTP,
// as an operator would).
package main
