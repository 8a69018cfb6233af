// Package bank is the "bank" benchmark scenario: clients move money
// between two random accounts of a few, reading both balances with plain
// SELECTs and writing them back as absolute values in one transaction,
// through lockproxy (a rule that locks reads in transactions, so the reads
// are locked current reads), against the same code with SELECT ... FOR
// UPDATE directly on MariaDB (what a careful application writes) and the
// unsafe code directly (which drifts). It measures what lockproxy's row
// locks cost on multi-row transactions and shows the total never drifts.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package bank
