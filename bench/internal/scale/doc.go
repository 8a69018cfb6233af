// Package scale is the "scale" benchmark scenario: guarded single-row
// UPDATEs on keys drawn uniformly from a large table, by 8, 64 and 256
// clients, through 1, 2 and 4 lockproxy instances (lock rule on write,
// Redis; with linger, with a release window, and with the host's cores
// shared out among the instances) and directly, interleaved. It shows
// whether adding instances at an equal number of clients keeps or loses
// throughput; on a small machine, where the instances share the cores
// with everything else, it also shows what each added process costs.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package scale
