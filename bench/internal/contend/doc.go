// Package contend is the shared workload code of bench's contention
// scenarios (flashsale, hotkey, rewrite, disjoint, redisrtt): the
// sku_stock/orders schema, the application patterns a shop would write
// (read-then-write in a transaction, SELECT ... FOR UPDATE, an application
// side Redis lock, autocommit read-then-write, the atomic UPDATE), drivers
// that run many clients at once, and the arithmetic of their results
// (latency percentiles, oversold and lost updates, fairness).
//
// It is application code talking to MariaDB, Redis and lockproxy over the
// wire; it must never import lockproxy's own packages (proxy, rules,
// lockmgr, router, parser, cmd).
package contend
