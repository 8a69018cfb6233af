// Package manyclients is the "manyclients" benchmark scenario: thousands
// of client connections through one lockproxy, a few of them busy with
// autocommit point selects and short transactions, with
// backends.pool.multiplex on (at most 200 primary connections) and off
// (one primary connection per client), interleaved: how many connections
// MariaDB sees, errors, and the busy clients' throughput in both modes.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package manyclients
