// Package results is the benchmark suite's results model: one JSON document
// per scenario under bench/results/<scenario>.json, holding the machine it ran
// on, the exact command, the targets it was measured against and the
// scenario's own raw figures.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): the benchmark talks to lockproxy over the wire only.
package results
