// Package scenario declares what a benchmark scenario is (Scenario) and the
// Registry the bench command picks scenarios from by name. A new scenario is
// a package with a type implementing Scenario, registered in
// bench/cmd/bench.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmark talks to lockproxy over the wire only.
package scenario
