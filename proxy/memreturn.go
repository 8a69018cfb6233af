package proxy

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Once the number of sessions has fallen to half its peak, and by at
// least returnMinSessions, what the ended sessions held is given back to
// the operating system when no session has ended for returnAfter (or
// after returnWaits such waits under steady churn). Left to itself, the
// Go runtime keeps freed pages until its next garbage collection and then
// gives them back slowly; a proxy that had thousands of connections for a
// burst allocates little once it is over, and stayed at the burst's size.
const (
	returnMinSessions = 256
	returnAfter       = time.Second
	returnWaits       = 10
)

// memReturn counts live sessions and gives memory back when they fall
// (see returnMinSessions). Safe for concurrent use.
type memReturn struct {
	mu    sync.Mutex
	live  int
	peak  int  // the most live sessions since memory was last given back
	armed bool // a give-back is pending
	ends  int  // sessions ended since the pending give-back last waited
	waits int  // how often it waited
	after time.Duration
	free  func() // freeOSMemory outside tests
}

func newMemReturn() *memReturn {
	return &memReturn{after: returnAfter, free: freeOSMemory}
}

// freeOSMemory gives the operating system what the heap does not use,
// after two collections: the buffers the ended sessions gave their pools
// (connbuf.go) are dropped by the second.
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// opened counts a new session.
func (m *memReturn) opened() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live++
	m.peak = max(m.peak, m.live)
}

// ended counts a session gone, and arms the give-back when the sessions
// have fallen far enough.
func (m *memReturn) ended() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live--
	m.ends++
	if m.armed || m.peak-m.live < returnMinSessions || m.live > m.peak/2 {
		return
	}
	m.armed, m.ends, m.waits = true, 0, 0
	time.AfterFunc(m.after, m.fire)
}

// fire gives the memory back once sessions have stopped ending.
func (m *memReturn) fire() {
	m.mu.Lock()
	if m.ends > 0 && m.waits < returnWaits {
		m.ends = 0
		m.waits++
		m.mu.Unlock()
		time.AfterFunc(m.after, m.fire)
		return
	}
	m.mu.Unlock()
	m.free()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak, m.armed = m.live, false
}
