// Package soakreport renders a soak run as the Markdown "## Latest run"
// section of bench/SOAK.md (the verdict, the machine, the bounds table,
// the invariants, the workload and error counts, lockproxy's counters)
// and replaces that section in the file, keeping the text above it.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package soakreport
