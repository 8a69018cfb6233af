// Package router knows lockproxy's backends: the primary and the read
// replicas. It checks each of them on an interval over one monitoring
// connection, measures replication lag the right way (a stopped replication
// thread, a NULL Seconds_Behind_Master or a failed check make a replica
// unhealthy; an unknown lag is never taken for 0), and picks a healthy
// replica within the maximum lag for a read, balanced by the fewest
// outstanding queries with a round-robin tie-break.
//
// The proxy decides whether a statement may go to a replica at all (writes,
// locking reads, transactions, session effects, hints, rules); this package
// only answers "which replica, if any" and "is the primary up", and offers
// the GTID primitives (GTIDReached, WaitGTIDQuery, PickFor) the proxy needs
// for read-your-writes.
//
// Metrics (on the Registerer passed to New, never the global one):
//
//   - lockproxy_replica_healthy{backend}: 1 when the replica may take reads.
//   - lockproxy_replica_lag_seconds{backend}: Seconds_Behind_Master; NaN
//     while the lag is unknown (replication stopped, NULL lag, failed check),
//     so the series stays visible but never reads as "in sync". Alert on
//     lockproxy_replica_healthy, not on the lag alone.
//   - lockproxy_backend_up{backend,role}: 1 when the last check connected and
//     the server answered, whatever its replication state.
//   - lockproxy_health_checks_total{backend,result}: result is ok (healthy),
//     unhealthy (answered, but not fit for reads) or error (connect or query
//     failed).
//
// router must never import another lockproxy package: it takes plain values
// (Config), not the rules configuration, so proxy → router is the only edge.
package router
