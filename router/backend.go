package router

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Role says what a backend is for.
type Role string

// The roles of a backend.
const (
	RolePrimary Role = "primary"
	RoleReplica Role = "replica"
)

// backend is one server the router checks. addr and role never change; the
// state is guarded by mu; outstanding is atomic; db and replicaStmt belong
// to the backend's check loop alone.
type backend struct {
	addr        string
	role        Role
	outstanding atomic.Int64
	kick        chan struct{} // buffered 1: check now
	checked     chan struct{} // closed when the first check has finished
	checkedOnce sync.Once

	// set by Router.launch under Router.mu; done is closed when the loop
	// has exited and closed db.
	cancel func()
	done   chan struct{}

	db          *sql.DB
	dbFor       dialSettings
	replicaStmt string // SHOW SLAVE STATUS, or SHOW REPLICA STATUS once the former failed to parse

	mu sync.Mutex
	st state
}

// state is what the last check (or MarkDown) found.
type state struct {
	checked   bool
	up        bool // connected and answered
	healthy   bool // may take traffic: primary up; replica replicating within MaxLag
	lag       time.Duration
	lagKnown  bool
	gtid      string
	err       error // why not healthy (nil when healthy)
	lastCheck time.Time
	markedAt  time.Time // last MarkDown not yet overridden by a later check
	retired   bool      // removed by Update: its metric series are gone for good
}

// checkResult is the outcome of one probe.
type checkResult struct {
	up       bool
	lag      time.Duration
	lagKnown bool
	gtid     string
	err      error // nil means healthy
}

// result names the outcome for lockproxy_health_checks_total.
func (r checkResult) result() string {
	switch {
	case r.err == nil:
		return "ok"
	case r.up:
		return "unhealthy"
	default:
		return "error"
	}
}

func newBackend(addr string, role Role) *backend {
	return &backend{
		addr:    addr,
		role:    role,
		kick:    make(chan struct{}, 1),
		checked: make(chan struct{}),
		st:      state{err: ErrNotChecked},
	}
}

// snapshot returns a copy of the state.
func (b *backend) snapshot() state {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

// apply records the result of a check that started at started, in the
// state and in m, and returns the states before and after. A check that
// started before the last MarkDown cannot make the backend healthy again.
// The metrics change under the same lock as the state, so whoever sees the
// new state sees the new metrics.
func (b *backend) apply(res checkResult, started, now time.Time, m *metrics) (prev, cur state) {
	b.mu.Lock()
	prev = b.st
	st := b.st
	st.checked, st.up, st.lastCheck = true, res.up, now
	st.lag, st.lagKnown = res.lag, res.lagKnown
	if res.up {
		st.gtid = res.gtid
	}
	st.healthy, st.err = res.err == nil, res.err
	if !st.markedAt.IsZero() {
		if started.Before(st.markedAt) {
			st.healthy, st.err = false, prev.err
		} else {
			st.markedAt = time.Time{}
		}
	}
	b.st = st
	if !st.retired {
		m.observe(b, st, res.result())
	}
	b.mu.Unlock()
	b.checkedOnce.Do(func() { close(b.checked) })
	return prev, st
}

// markDown takes the backend out until a check that starts after now
// succeeds, records it in m, and returns the states before and after.
func (b *backend) markDown(cause error, now time.Time, m *metrics) (prev, cur state) {
	if cause == nil {
		cause = errors.New("reported broken")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	prev = b.st
	b.st.healthy = false
	b.st.err = fmt.Errorf("%w: %w", ErrMarkedDown, cause)
	b.st.markedAt = now
	if !b.st.retired {
		m.observe(b, b.st, "")
	}
	return prev, b.st
}

// retire drops b's metric series from m; no later event recreates them.
func (b *backend) retire(m *metrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st.retired = true
	m.forget(b)
}

// usable reports whether a replica may take a read with maxLag now.
func (b *backend) usable(maxLag time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st.healthy && b.st.lagKnown && b.st.lag <= maxLag
}

// poke asks the check loop for a check now; it never blocks.
func (b *backend) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// track counts one outstanding query and returns its idempotent release.
func (b *backend) track() func() {
	b.outstanding.Add(1)
	var released atomic.Bool
	return func() {
		if released.CompareAndSwap(false, true) {
			b.outstanding.Add(-1)
		}
	}
}
