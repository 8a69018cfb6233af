// Package mysqllock is the MySQL/MariaDB lock-table backend of lockproxy
// (locks.backend: mysql): one InnoDB row per lock key, on the primary or
// another server, reached over connections of its own (database/sql with
// go-sql-driver/mysql, short autocommit statements, never inside an
// application's transaction).
//
// Tables (created with CREATE TABLE IF NOT EXISTS when first used; the name
// is validated as an identifier and quoted):
//   - T: kh (SHA-256 of the key, primary key, so keys of any length fit),
//     lock_key (the key itself, for people), owner (holder token, NULL when
//     free), own and prio (holder's owner id and age, for wound-wait),
//     fence (BIGINT UNSIGNED), expires_at (DATETIME(6), database clock),
//     wounded.
//   - T_wait: waiter tickets (kh, prio, tok, expires_at), primary key
//     (kh, prio, tok), so "is an older waiter queued?" is one index range.
//   - T_ddl: one row (id 1, version, locker) whose version every
//     schema-change announcement raises (lockmgr.SchemaAnnouncer), made by
//     the first announcement. Every Locker reads it every SchemaPoll
//     (100ms) and delivers a version another Locker raised, also one
//     raised while the server was away.
//   - T_observe: observe mode's notes (lockmgr.Observer): kh, own, seq
//     (AUTO_INCREMENT, the note's place, kept when noted again),
//     expires_at; created at the first Observe. Never read by Acquire.
//
// A row is never deleted: a release sets owner to NULL, so the fence column
// only grows (each grant sets it to max(fence+1, database time in µs), so it
// still grows if the table is recreated). Expiry is computed on the
// database clock (NOW(6) + INTERVAL ttl); the lease's validity runs on this
// process's monotonic clock from before the granting statement was sent,
// less 1% of the ttl plus 2ms.
//
// Acquire is a conditional UPDATE that takes a free or expired row when no
// older live ticket is queued (affected rows say whether it won; the fence
// comes back through LAST_INSERT_ID(expr)), or, for a key never seen, an
// INSERT ... SELECT with the same guard (error 1062: the row exists). A row
// already ours (a grant whose reply was lost to a timeout) is taken again.
// An uncontended acquire plus release is two statements once the key's row
// exists (three the first time). A waiter queues a
// ticket and polls with jittered backoff (the database cannot notify),
// never sleeping past the holder's remaining lease, the context's deadline,
// or 100ms (MaxPoll); within one Locker only the oldest local waiter of a
// key polls, and a local release wakes it at once. Leases are renewed by
// one goroutine per Locker every ttl/3 with one UPDATE ... WHERE owner IN
// (...) and one SELECT that counts the rows still ours and reads their
// wounded flags.
//
// Deadlocks are prevented by wound-wait (package lockmgr): a waiter that
// finds the key held by a younger transaction sets the row's wounded flag;
// the younger owner's next (or current) wait checks the flags of the rows it
// holds and fails with lockmgr.ErrDeadlock, and renewal reports the flag
// too. Errors that mean the database cannot be reached or did not answer
// in time wrap lockmgr.ErrUnavailable; lock-wait timeouts, InnoDB
// deadlocks between lock statements and statements the server's own time
// limit or a KILL QUERY cut (max_statement_time, max_execution_time) are
// retried.
//
// Connections made by Open (or Connector) run READ COMMITTED, so the
// guards' reads of the waiter table take no gap locks; this needs a binlog
// format of ROW or MIXED (the defaults of MySQL 8 and MariaDB), not
// STATEMENT. A pool passed to New should come from Connector. Lock rows go
// to the binlog like any write and so reach the replicas; a failover to a
// replica that has them keeps the locks, one that lacks the latest grants
// can grant them again (the same window as a Redis failover).
//
// The package imports only lockmgr and its internal engine and bookkeeping
// (lockmgr/internal/pollwait, lockmgr/internal/leasebook,
// lockmgr/internal/schemaword) among lockproxy
// packages and must never import another.
package mysqllock
