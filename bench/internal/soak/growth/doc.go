// Package growth holds the soak's resource bounds and judges them: per
// instance, goroutines and open fds idle against idle, memory under load
// against under load, each end value against start + max(Abs, Rel*start).
// A Snapshot is an instance's gauges in one state; Compare turns the four
// snapshots of every instance into the rows of the bounds table.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package growth
