// Package leasebook is the in-process bookkeeping shared by the lockmgr
// backends that renew each lease themselves (redislock, and the polling
// engine pollwait under mysqllock and redlock): the local wait queue per key
// (only its head talks to the service, so a release wakes one contender per
// process), wound-wait state per transaction, the leases being acquired or
// held with their granted keys, fences and validity deadline, and the
// renewal loop that extends or loses them.
//
// A Book knows nothing of the service behind it: a backend does the calls
// (try, renew, release) and reports their outcome to the Book.
//
// It imports only lockmgr among lockproxy packages and must never import a
// backend, pollwait or any other lockproxy package.
package leasebook
