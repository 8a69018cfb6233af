// Package memlock is the in-memory lock backend: locks visible to one
// lockproxy process only, for tests and single-instance deployments. It
// logs a warning at construction, because two proxies each using it do not
// exclude each other.
//
// Waiting is FIFO by transaction age (older first, then arrival) with
// direct hand-off on release: no polling. Deadlocks are prevented by
// wound-wait as described in package lockmgr. Leases never expire while the
// process lives.
//
// It imports only lockmgr among lockproxy packages and must never import
// another lockproxy package.
package memlock
