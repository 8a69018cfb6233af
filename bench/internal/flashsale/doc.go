// Package flashsale is the "flashsale" benchmark scenario: M buyers rush a
// stock of 100 units of one sku. The unsafe read-then-write transaction goes
// through N lockproxy instances with a lock rule (text and prepared), the
// autocommit read-then-write through N instances with a rewrite-only rule,
// and the baselines run directly on MariaDB: the same unsafe transaction
// (which oversells), SELECT ... FOR UPDATE, and an application-side Redis
// lock. It reports oversold units, lost updates, orders/s, transactions/s
// and latency per buy, each as a ratio against its direct baseline.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package flashsale
