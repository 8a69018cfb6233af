// Package testbed gives integration tests the real servers lockproxy works
// against: a MariaDB primary, a MariaDB replica replicating from it with
// GTID, and a Redis, each on a private loopback port chosen at run time and
// started by scripts/testbed.sh. No mock stands in for them.
//
// A test package wires it up once:
//
//	func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
//
// and each integration test asks for the bed:
//
//	bed := testbed.Get(t)
//	db := bed.Open(t, bed.PrimaryAddr, bed.TempDatabase(t))
//
// Where the bed comes from: with $LOCKPROXY_TESTBED naming a directory that
// `scripts/testbed.sh up DIR` filled (as `make test` does), every test
// package of the run shares that one bed. Otherwise the first Get starts a
// private bed for the test binary, and Main stops it after m.Run; a watchdog
// stops it too should the binary die first. When no bed can be had, Get
// fails the test under CI=true and skips it otherwise, with the reason.
//
// A shared bed is used by several test binaries at once. On it a test keeps
// to its own database (TempDatabase) and its own Redis keys (UniqueName as a
// prefix), never flushes Redis, and never stops, kills or restarts a server:
// the helpers that would do so return ErrShared. A test that needs to break
// servers asks for a bed of its own with Private.
//
// testbed is for tests only: no non-test code may import it, and it must
// never import lockproxy's own packages, which it sits below.
package testbed
