package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// The pool counts the connections it opened per backend address (lent
// and idle), and with backends.pool.multiplex bounds the primary's at
// backends.pool.max_connections. A session that finds the bound reached
// takes an idle connection of another login (closed to make room), or
// waits, first come first served, up to backends.pool.wait_timeout for a
// connection to come back (handed over as it is kept: pool.keep) or to
// close (its slot handed over: pool.free).

// errPoolExhausted: no primary connection came free within
// backends.pool.wait_timeout (1040).
var errPoolExhausted = errors.New("proxy: no backend connection free")

// poolBounds is the pool's count of open connections and its queue of
// sessions waiting for one. Guarded by pool.mu.
type poolBounds struct {
	// settings returns backends.pool as configured now (the Server's;
	// the defaults for a pool of its own).
	settings func() rules.PoolConfig
	open     map[string]int
	waiters  map[string][]*poolWaiter
	m        poolMetrics
	stop     chan struct{} // closed when the pool closes: the reaper ends
}

// poolWaiter is a session waiting for a connection of key: got receives
// one connection of key, or nil, a slot to dial one with.
type poolWaiter struct {
	key poolKey
	// judged: the waiter is a session whose login MariaDB judged (pool.lend),
	// which takes a connection of a relayed login as it is.
	judged bool
	got    chan *backendConn
}

func newPoolBounds() poolBounds {
	return poolBounds{
		settings: defaultPoolSettings,
		open:     make(map[string]int),
		waiters:  make(map[string][]*poolWaiter),
		m:        newPoolMetrics(),
		stop:     make(chan struct{}),
	}
}

func defaultPoolSettings() rules.PoolConfig {
	return rules.PoolConfig{MaxIdle: rules.DefaultPoolMaxIdle, WaitTimeout: rules.Duration(rules.DefaultPoolWaitTimeout)}
}

// bound is the number of connections key's backend may have open: with
// multiplexing, max_connections for the primary and for each replica;
// 0, no bound.
func (p *pool) bound(key poolKey) int {
	st := p.bounds.settings()
	if !st.Multiplex || !key.track && !key.readOnly {
		return 0
	}
	return st.MaxConnections
}

// dial opens a connection of key once the backend's bound leaves room
// for it, or returns one handed over by a session giving it back (to a
// judged caller only, for a relayed login: see pool.lend).
func (p *pool) dial(ctx context.Context, key poolKey, judged bool) (*backendConn, error) {
	b, err := p.room(ctx, key, judged)
	if err != nil || b != nil {
		return b, err
	}
	if b, err = dialBackend(ctx, key); err != nil {
		p.free(key)
		return nil, err
	}
	b.counted = p
	return b, nil
}

// dialPassed opens a connection of key, a passed login (relayLogin)
// whose requests converse relays to the client, once the backend's bound
// leaves room for it. It never takes a connection given back: the
// client's answers log in this one.
func (p *pool) dialPassed(ctx context.Context, key poolKey, converse func([]byte) ([]byte, error)) (*backendConn, error) {
	b, err := p.room(ctx, key, false)
	if err != nil {
		return nil, err
	}
	if b != nil { // a slot comes with it: take the slot, close the connection
		b.counted = nil
		b.close()
	}
	if b, err = dialBackendWith(ctx, key, converse); err != nil {
		p.free(key)
		return nil, err
	}
	b.counted = p
	return b, nil
}

// room takes a slot for a new connection of key (nil, nil), waiting when
// the bound is reached, or a connection handed over meanwhile.
func (p *pool) room(ctx context.Context, key poolKey, judged bool) (*backendConn, error) {
	limit := p.bound(key)
	p.mu.Lock()
	if limit == 0 || p.closed || p.bounds.open[key.addr] < limit {
		p.bounds.open[key.addr]++
		p.mu.Unlock()
		return nil, nil
	}
	if v := p.evictLocked(key.addr); v != nil {
		v.counted = nil // its slot is the new connection's
		p.mu.Unlock()
		v.close()
		return nil, nil
	}
	if key.readOnly {
		// A replica's reads go to the primary rather than wait.
		p.mu.Unlock()
		p.bounds.m.waits.WithLabelValues(key.addr, "primary").Inc()
		return nil, errorf(errPoolExhausted, "backends.pool.max_connections (%d) connections to the replica %s are in use", limit, key.addr)
	}
	w := &poolWaiter{key: key, judged: judged, got: make(chan *backendConn, 1)}
	p.bounds.waiters[key.addr] = append(p.bounds.waiters[key.addr], w)
	p.mu.Unlock()
	wait := p.bounds.settings().WaitTimeout.D()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case b := <-w.got:
		p.bounds.m.waits.WithLabelValues(key.addr, "got").Inc()
		return b, nil
	case <-t.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	queued := p.dropWaiterLocked(w)
	p.mu.Unlock()
	if !queued { // handed something just as the wait ended
		p.bounds.m.waits.WithLabelValues(key.addr, "got").Inc()
		return <-w.got, nil
	}
	p.bounds.m.waits.WithLabelValues(key.addr, "timeout").Inc()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, errorf(errPoolExhausted, "no connection to the primary %s came free within backends.pool.wait_timeout (%v): backends.pool.max_connections (%d) are in use",
		key.addr, wait, limit)
}

// free gives the slot of a closed connection of key to the first session
// waiting for one, else counts it closed.
func (p *pool) free(key poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.nextWaiterLocked(key.addr); w != nil {
		w.got <- nil
		return
	}
	p.bounds.open[key.addr]--
}

// handLocked hands b, clean and about to be kept idle, to the first
// session waiting for a connection to its backend: b itself when that
// session's login is b's, else b's slot (b is closed). It reports whether
// b was taken.
func (p *pool) handLocked(b *backendConn) bool {
	if b.counted == nil || len(p.bounds.waiters[b.key.addr]) == 0 {
		return false
	}
	w := p.nextWaiterLocked(b.key.addr)
	if w.key == b.key && (!b.key.relay.on || w.judged) { // a relayed login logs in again: pool.get
		w.got <- b
		return true
	}
	b.counted = nil
	_ = b.nc.Close()
	w.got <- nil
	return true
}

func (p *pool) nextWaiterLocked(addr string) *poolWaiter {
	ws := p.bounds.waiters[addr]
	if len(ws) == 0 {
		return nil
	}
	w := ws[0]
	ws[0] = nil
	if len(ws) == 1 {
		delete(p.bounds.waiters, addr)
	} else {
		p.bounds.waiters[addr] = ws[1:]
	}
	return w
}

// dropWaiterLocked takes w out of the queue; false: it was handed
// something already.
func (p *pool) dropWaiterLocked(w *poolWaiter) bool {
	ws := p.bounds.waiters[w.key.addr]
	for i, x := range ws {
		if x == w {
			p.bounds.waiters[w.key.addr] = append(ws[:i:i], ws[i+1:]...)
			return true
		}
	}
	return false
}

// failWaitersLocked lets every waiting session dial: the pool is closing.
func (p *pool) failWaitersLocked() {
	for addr := range p.bounds.waiters {
		for w := p.nextWaiterLocked(addr); w != nil; w = p.nextWaiterLocked(addr) {
			p.bounds.open[addr]++
			w.got <- nil
		}
	}
	select {
	case <-p.bounds.stop:
	default:
		close(p.bounds.stop)
	}
}

// evictLocked takes an idle connection to addr of any login out of the
// pool, the oldest of the first login found; nil when there is none.
func (p *pool) evictLocked(addr string) *backendConn {
	for k, list := range p.idle {
		if k.addr != addr || len(list) == 0 {
			continue
		}
		b := list[0]
		p.idle[k] = list[1:]
		if len(p.idle[k]) == 0 {
			delete(p.idle, k)
		}
		return b
	}
	return nil
}

// expired reports whether b has been idle longer than timeout (0: never).
func (b *backendConn) expired(timeout time.Duration) bool {
	return timeout > 0 && time.Since(b.idleAt) > timeout
}

// reap closes idle connections older than backends.pool.idle_timeout,
// every reapEvery, until the pool closes.
func (p *pool) reap() {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-p.bounds.stop:
			return
		case <-t.C:
		}
		timeout := p.bounds.settings().IdleTimeout.D()
		if timeout <= 0 {
			continue
		}
		var old []*backendConn
		p.mu.Lock()
		for k, list := range p.idle {
			kept := list[:0]
			for _, b := range list {
				if b.expired(timeout) {
					old = append(old, b)
				} else {
					kept = append(kept, b)
				}
			}
			if len(kept) == 0 {
				delete(p.idle, k)
			} else {
				clear(list[len(kept):])
				p.idle[k] = kept
			}
		}
		p.mu.Unlock()
		for _, b := range old {
			b.close()
		}
	}
}

// reapEvery is how often idle connections are checked against
// backends.pool.idle_timeout.
const reapEvery = time.Second

// poolMetrics are the pool's series (docs/metrics.md).
type poolMetrics struct {
	conns      *prometheus.Desc
	waits      *prometheus.CounterVec
	pinned     *prometheus.GaugeVec
	reprepared prometheus.Counter
}

func newPoolMetrics() poolMetrics {
	return poolMetrics{
		conns: prometheus.NewDesc("lockproxy_backend_connections",
			"Backend connections lockproxy has open, by backend (host:port) and state (in_use: lent to or pinned by a session; idle: pooled).",
			[]string{"backend", "state"}, nil),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_backend_connection_waits_total",
			Help: "Sessions that waited for a backend connection because backends.pool.max_connections were open, by backend and outcome (got|timeout; primary: a read a replica would have served went to the primary instead of waiting).",
		}, []string{"backend", "outcome"}),
		pinned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockproxy_sessions_pinned",
			Help: "Sessions that keep their primary connection under backends.pool.multiplex, by reason (a session pinned for several counts once per reason).",
		}, []string{"reason"}),
		reprepared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockproxy_statements_reprepared_total",
			Help: "Prepared statements a session under backends.pool.multiplex prepared again on the primary connection it borrowed, as their first use there.",
		}),
	}
}

// register puts the pool's series on reg (nil: nowhere) and makes the
// pool read backends.pool through settings.
func (p *pool) register(reg prometheus.Registerer, settings func() rules.PoolConfig) {
	p.bounds.settings = settings
	for _, r := range pinReasons {
		p.bounds.m.pinned.WithLabelValues(r.name)
	}
	go p.reap()
	if reg != nil {
		reg.MustRegister(poolCollector{p}, p.bounds.m.waits, p.bounds.m.pinned, p.bounds.m.reprepared)
	}
}

// poolCollector reads lockproxy_backend_connections from the pool when
// scraped.
type poolCollector struct{ p *pool }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.p.bounds.m.conns }

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	p.mu.Lock()
	idle := make(map[string]int)
	for k, list := range p.idle {
		idle[k.addr] += len(list)
	}
	open := make(map[string]int, len(p.bounds.open))
	for addr, n := range p.bounds.open {
		open[addr] = n
	}
	p.mu.Unlock()
	for addr, n := range open {
		ch <- prometheus.MustNewConstMetric(p.bounds.m.conns, prometheus.GaugeValue, float64(max(n-idle[addr], 0)), addr, "in_use")
		ch <- prometheus.MustNewConstMetric(p.bounds.m.conns, prometheus.GaugeValue, float64(idle[addr]), addr, "idle")
	}
}
