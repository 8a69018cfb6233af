// Package gobench is the "gobench" benchmark scenario: it runs lockproxy's
// own Go micro-benchmarks (the parser, rule matching and every lock
// backend) as `go test -bench` subprocesses against the bench environment's
// test bed, parses the standard benchmark output (ns/op, B/op, allocs/op and
// custom metrics), takes medians over interleaved rounds and reports the
// parser's targets and the lock backends side by side.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmarks run in a child `go test` process and
// are known to it only by package path and benchmark name.
package gobench
