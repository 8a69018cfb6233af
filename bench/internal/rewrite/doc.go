// Package rewrite is the "rewrite" benchmark scenario: 64 clients decrement
// one hot row with the unsafe autocommit read-then-write (SELECT stock;
// UPDATE SET stock = <read-1>) through one lockproxy whose rule rewrites
// the UPDATE (mode delta, min 0) and takes no lock, against the atomic
// `UPDATE ... SET stock = stock - 1 WHERE sku_id = ? AND stock > 0` sent
// directly, and against the unsafe code sent directly (which loses
// updates). The atomic UPDATE and the unsafe code also run through the
// bare Go relay (bench/cmd/relay, a TCP relay that parses nothing): the
// floor for one and for two statements through any proxy on this host.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package rewrite
