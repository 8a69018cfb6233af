// Package invariant judges whether a soak run was correct, apart from
// resource growth: no unexpected client error, no negative or oversold
// stock, no lost update (stock or rewrite counter), abandoned transactions
// rolled back and their locks freed in time, the rules and routing
// exercised, and nothing held, waiting or connected at the end.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package invariant
