// Package readwrite is the benchmark of sysbench's oltp_read_write with a
// locking rule on the table it writes: direct against one lockproxy with
// no rules and one that guards sbtest1 (write, locking_read, read_in_txn,
// Redis) and one with the same rule on the in-memory lock backend (the
// floor of any lock service behind the relay), text and prepared,
// interleaved; throughput ratios, CPU and Redis commands per query.
package readwrite
