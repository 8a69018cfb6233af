package proxy

import (
	"sync/atomic"
)

// Memory lockproxy holds on behalf of clients is budgeted twice: per
// session (proxy.session_memory) and for the whole process
// (proxy.memory_budget). What counts: client packets beyond a small
// buffer every session has, long data kept for key derivation, the texts
// and plans of prepared statements, the parse of a statement being
// analysed, and a
// large result row held for a rewrite's capture (other large rows are
// streamed, never held: passRow). A command whose memory would exceed
// either budget is answered with 1041 (ER_OUT_OF_RESOURCES) instead of
// being served; the session goes on (a row the budget cannot hold is
// streamed instead, and its value is not captured).

// memBudget is a byte budget shared by goroutines. The zero value has no
// room; a nil *memBudget has unlimited room.
type memBudget struct {
	limit atomic.Int64
	used  atomic.Int64
}

func newMemBudget(limit int64) *memBudget {
	b := &memBudget{}
	b.limit.Store(limit)
	return b
}

// setLimit changes the limit (on reload); what is taken stays taken.
func (b *memBudget) setLimit(n int64) { b.limit.Store(n) }

// take reserves n bytes if that keeps the budget within frac (0 < frac <=
// 1) of its limit, and reports whether it did.
func (b *memBudget) take(n int64, frac float64) bool {
	if b == nil || n <= 0 {
		return true
	}
	lim := int64(float64(b.limit.Load()) * frac)
	for {
		u := b.used.Load()
		if u+n > lim {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give returns n bytes taken before.
func (b *memBudget) give(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// sessionMem is one session's budget, drawing on the process's. It is used
// by the session's goroutine only (the global budget it draws on is
// shared).
type sessionMem struct {
	global *memBudget
	limit  int64
	used   int64
}

// take reserves n bytes of both budgets, within frac of each limit.
func (m *sessionMem) take(n int64, frac float64) bool {
	if m == nil || n <= 0 {
		return true
	}
	if m.used+n > int64(float64(m.limit)*frac) {
		return false
	}
	if !m.global.take(n, frac) {
		return false
	}
	m.used += n
	return true
}

// give returns n bytes to both budgets.
func (m *sessionMem) give(n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.used -= n
	m.global.give(n)
}

// Shares of a budget that each kind of memory may fill: plans of prepared
// statements stop being kept well before packets and statements being
// served are refused, so a session full of prepared statements still
// serves.
const (
	shareAll   = 1.0
	sharePlans = 0.5
)

// outOfMemory is the errOutOfMemory that refuses a command whose memory
// would exceed a budget.
func outOfMemory(what string, n int64) error {
	return errorf(errOutOfMemory,
		"Out of memory: %s needs %d bytes over proxy.session_memory or proxy.memory_budget; try again later", what, n)
}

// shrinkBuffers drops packet buffers a command grew beyond freePacketBuf:
// the client's (charged to the budget) and the backends' (a large row or
// result packet), so an idle session holds little whatever it last did.
func (s *session) shrinkBuffers() {
	s.mem.give(s.ex.rowCharge)
	s.ex.rowCharge = 0
	s.cr.shrink()
	if s.be != nil {
		s.be.r.shrink()
	}
	if s.route.replica.conn != nil {
		s.route.replica.conn.r.shrink()
	}
}
