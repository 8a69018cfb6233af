package main

import (
	"os"
	"runtime/debug"
	"syscall"

	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// fdsPerSession is how many file descriptors one client session may hold:
// its socket, its primary connection and a replica connection.
const fdsPerSession = 3

// fdsReserved covers what is open besides sessions: listeners, the lock
// service, logs, the admin server, connections in the backend pool.
const fdsReserved = 256

// fdsNeeded is how many file descriptors cfg may need at most.
func fdsNeeded(p rules.ProxyConfig) uint64 {
	return uint64(p.MaxConnections)*fdsPerSession + uint64(p.MaxHandshakes) + fdsReserved
}

// raiseFDLimit raises the soft RLIMIT_NOFILE towards what cfg needs, up
// to the hard limit, and warns when even that is too low: accept then
// fails with EMFILE before max_connections is reached (lockproxy backs
// off and goes on, but clients wait).
func raiseFDLimit(p rules.ProxyConfig, log *zap.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the file descriptor limit", zap.Error(err))
		return
	}
	need := fdsNeeded(p)
	if lim.Cur < need && lim.Cur < lim.Max {
		raised := lim
		raised.Cur = min(need, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the file descriptor limit", zap.Uint64("from", lim.Cur), zap.Uint64("to", raised.Cur), zap.Error(err))
		} else {
			lim = raised
		}
	}
	if lim.Cur < need {
		log.Warn("the file descriptor limit is below what proxy.max_connections may need; raise it (ulimit -n, LimitNOFILE=) or lower max_connections",
			zap.Uint64("limit", lim.Cur), zap.Uint64("needed", need), zap.Int("max_connections", p.MaxConnections))
	}
}

// memoryHeadroom is what the Go runtime may hold beyond the memory budget
// (sessions' buffers and goroutines, the analysis cache, the lock table).
const memoryHeadroom = 512 << 20

// setMemoryLimit makes the garbage collector work harder as the heap
// nears proxy.memory_budget plus headroom, unless GOMEMLIMIT says
// otherwise. It is a soft limit: nothing fails when it is passed.
func setMemoryLimit(p rules.ProxyConfig, log *zap.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(p.MemoryBudget) + memoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Debug("Go memory limit set", zap.Int64("bytes", limit))
}
