package router

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Router knows the backends and their health. Create it with New, call
// Start once to begin checking, Close to stop. All methods are safe for
// concurrent use; Pick, PickAndTrack, Acquire, PrimaryHealthy and Status
// never block on I/O.
type Router struct {
	log     *zap.Logger
	metrics *metrics
	rr      atomic.Uint64 // round-robin start of the next pick

	mu       sync.RWMutex
	cfg      Config // normalized
	primary  *backend
	replicas []*backend // in Config.Replicas order
	runCtx   context.Context
	stop     context.CancelFunc
	closed   bool
}

// New returns a Router for cfg (defaults filled in, see Config). Metrics go
// on reg; a nil reg keeps them unexported. A nil log discards logs. Nothing
// is checked until Start.
func New(cfg Config, log *zap.Logger, reg prometheus.Registerer) *Router {
	if log == nil {
		log = zap.NewNop()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	r := &Router{log: log, metrics: newMetrics(reg, log)}
	r.cfg = cfg.normalized()
	if r.cfg.Primary != "" {
		r.primary = newBackend(r.cfg.Primary, RolePrimary)
	}
	for _, a := range r.cfg.Replicas {
		r.replicas = append(r.replicas, newBackend(a, RoleReplica))
	}
	return r
}

// Start begins checking every backend: one goroutine per backend, each
// checking at once and then every HealthInterval, until ctx ends or Close.
// Start returns when every backend has been checked once (each check is
// bounded by ConnectTimeout + 2×QueryTimeout) or ctx ends, so the router
// reports real health from the start. Calling Start again, or after Close,
// does nothing.
func (r *Router) Start(ctx context.Context) {
	r.mu.Lock()
	if r.runCtx != nil || r.closed {
		r.mu.Unlock()
		return
	}
	r.runCtx, r.stop = context.WithCancel(ctx)
	all := r.backendsLocked()
	for _, b := range all {
		r.launchLocked(b)
	}
	r.mu.Unlock()
	for _, b := range all {
		select {
		case <-b.checked:
		case <-b.done: // removed by Update, or closed
		case <-ctx.Done():
			return
		}
	}
}

// Close stops every check and closes the monitoring connections, waiting
// for checks in flight to end. The router keeps answering from the last
// known state. Close is idempotent.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	if r.stop != nil {
		r.stop()
	}
	all := r.backendsLocked()
	r.mu.Unlock()
	for _, b := range all {
		if b.done != nil {
			<-b.done
		}
	}
}

// Update applies a reloaded configuration. Backends whose address stays
// keep their health, lag and outstanding counts; new ones start unchecked
// (so out) and are checked at once; removed ones stop being checked and
// lose their metric series. Every kept backend is re-checked at once, so a
// new MaxLag or new credentials take effect without waiting an interval.
func (r *Router) Update(cfg Config) {
	cfg = cfg.normalized()
	r.mu.Lock()
	old := make(map[string]*backend, len(r.replicas))
	for _, b := range r.replicas {
		old[b.addr] = b
	}
	var removed []*backend
	if r.primary != nil && r.primary.addr != cfg.Primary {
		removed = append(removed, r.primary)
		r.primary = nil
	}
	if r.primary == nil && cfg.Primary != "" {
		r.primary = r.added(cfg.Primary, RolePrimary)
	} else if r.primary != nil {
		r.primary.poke()
	}
	replicas := make([]*backend, 0, len(cfg.Replicas))
	for _, a := range cfg.Replicas {
		if b, ok := old[a]; ok {
			delete(old, a)
			b.poke()
			replicas = append(replicas, b)
			continue
		}
		replicas = append(replicas, r.added(a, RoleReplica))
	}
	for _, b := range old {
		removed = append(removed, b)
	}
	r.cfg, r.replicas = cfg, replicas
	r.mu.Unlock()
	for _, b := range removed {
		r.retire(b)
	}
	r.log.Info("router: configuration updated", zap.Stringer("config", cfg))
}

// added creates a backend for Update and starts its checks if the router
// runs. r.mu must be held.
func (r *Router) added(addr string, role Role) *backend {
	b := newBackend(addr, role)
	if r.runCtx != nil && !r.closed {
		r.launchLocked(b)
	}
	return b
}

// retire stops a removed backend's checks and drops its metrics.
func (r *Router) retire(b *backend) {
	if b.cancel != nil {
		b.cancel()
		<-b.done
	}
	b.retire(r.metrics)
}

// launchLocked starts b's check loop. r.mu must be held and r.runCtx set.
func (r *Router) launchLocked(b *backend) {
	ctx, cancel := context.WithCancel(r.runCtx)
	b.cancel, b.done = cancel, make(chan struct{})
	go r.run(ctx, b)
}

// backendsLocked returns the primary (if any) and the replicas.
func (r *Router) backendsLocked() []*backend {
	all := make([]*backend, 0, 1+len(r.replicas))
	if r.primary != nil {
		all = append(all, r.primary)
	}
	return append(all, r.replicas...)
}

// config returns the current normalized configuration.
func (r *Router) config() Config {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cfg
}

// PrimaryHealthy reports whether the primary answered its last check. It
// is true before the first check has finished (the primary is the only
// place writes can go, so it is not failed on no evidence) and false when
// no primary is configured, when the last check failed, or after MarkDown
// until a later check succeeds.
func (r *Router) PrimaryHealthy() bool {
	r.mu.RLock()
	p := r.primary
	r.mu.RUnlock()
	if p == nil {
		return false
	}
	st := p.snapshot()
	return !st.checked && st.markedAt.IsZero() || st.healthy
}

// logChange logs a backend going out or coming back, once per transition.
func (r *Router) logChange(b *backend, prev, cur state) {
	fields := []zap.Field{zap.String("backend", b.addr), zap.String("role", string(b.role))}
	switch {
	case cur.healthy && !prev.healthy:
		if b.role == RoleReplica {
			fields = append(fields, zap.Duration("lag", cur.lag))
		}
		r.log.Info("router: backend in service", append(fields, zap.String("gtid", cur.gtid))...)
	case !cur.healthy && (prev.healthy || !prev.checked):
		r.log.Warn("router: backend out of service", append(fields, zap.Error(cur.err))...)
	}
}
