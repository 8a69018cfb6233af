// Package chart renders the benchmark's PNG charts (grouped bars, lines,
// with an optional target line) with gonum.org/v1/plot, so the suite draws
// its own figures from its JSON results.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package chart
