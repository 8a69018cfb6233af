// Package servertest runs the real servers the lockmgr backends' tests talk
// to (etcd, ZooKeeper): data and logs in a temporary directory (in memory
// where /dev/shm exists), free loopback ports, a readiness wait, stop and
// restart on the same ports and data, and the TestMain wiring that shares
// one server per test binary and fails rather than skips under CI=true when
// the server is not installed.
//
// It is for tests only. It imports no lockproxy package at all and must
// never import one (a backend's tests pass their own readiness check).
package servertest
