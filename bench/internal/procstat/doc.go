// Package procstat reads what the benchmark measures about processes from
// Linux /proc: a process's CPU time and resident memory (VmRSS, VmHWM), a
// sampler of its RSS over time, and the host's busy CPU share.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package procstat
