// Package soak runs the soak: it sets up a bed, the bench_soak schema and
// two lockproxy instances, samples them throughout, runs the warm-up, lets
// them drain, runs the measured workload, lets them drain again, and
// judges the growth bounds and invariants into a soakreport.Report. Its
// subpackages hold the parts: workload (the clients and the data),
// sampling (/metrics and /proc over time), growth (the bounds), invariant
// (the correctness checks) and soakreport (the Markdown).
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package soak
