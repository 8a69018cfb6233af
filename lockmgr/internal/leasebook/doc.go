// Package leasebook is the in-process lease bookkeeping shared by the
// lockmgr backends.
//
// Book serves the backends that renew each lease themselves (redislock,
// and the polling engine pollwait under mysqllock and redlock): the local
// wait queue per key (only its head talks to the service, so a release
// wakes one contender per process), wound-wait state per transaction, the
// leases being acquired or held with their granted keys, fences and
// validity deadline, and the renewal loop that extends or loses them.
//
// Session, Member and Owners serve the backends whose locks live as long
// as one service session kept alive by one goroutine (etcdlock, zklock):
// the session's validity and the leases it carries, their loss when the
// session goes, and wound-wait state per transaction id.
//
// Neither knows the service behind it: a backend does the calls (try,
// renew, keep-alive, release) and reports their outcome here.
//
// It imports only lockmgr among lockproxy packages and must never import a
// backend, pollwait or any other lockproxy package.
package leasebook
