// Package sampling reads the soak's lockproxy instances over time: it
// scrapes each instance's /metrics (Prometheus text format, parsed here),
// adds the process's peak RSS and CPU from /proc and the host's busy
// share, tags every Sample with the phase of the run it was taken in,
// and writes the series as CSV. It also reduces samples: the median of a
// gauge over the last samples of a phase, mean load, counter increases.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it reads lockproxy's /metrics over HTTP only.
package sampling
