// Package rewrite is the "rewrite" benchmark scenario: 64 clients decrement
// one hot row with the unsafe autocommit read-then-write (SELECT stock;
// UPDATE SET stock = <read-1>) through one lockproxy whose rule rewrites
// the UPDATE (mode delta, min 0) and takes no lock, against the atomic
// `UPDATE ... SET stock = stock - 1 WHERE sku_id = ? AND stock > 0` sent
// directly, and against the unsafe code sent directly (which loses
// updates). The two statements lockproxy sends MariaDB for the
// read-then-write (the SELECT and the guarded relative UPDATE) run directly
// and through the bare Go relay (bench/cmd/relay, a TCP relay that parses
// nothing): the latter is the floor for the rewrite through any proxy on
// this host. The atomic UPDATE and the unsafe code run through the relay
// too.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package rewrite
