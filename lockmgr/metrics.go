package lockmgr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock metrics of DESIGN.md §6. One Metrics per registry;
// several Lockers may share it. A nil *Metrics records nothing. Safe for
// concurrent use.
type Metrics struct {
	wait     *prometheus.HistogramVec
	acquires *prometheus.CounterVec
	hold     *prometheus.HistogramVec
	held     prometheus.Gauge
	waiters  prometheus.Gauge
	lost     *prometheus.CounterVec
}

// NewMetrics creates the lock metrics and registers them on reg (never the
// global registry: pass one in).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := prometheus.ExponentialBucketsRange(50e-6, 30, 16)
	m := &Metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockproxy_lock_wait_seconds", Buckets: buckets,
			Help: "Time from a lock request to its grant or failure.",
		}, []string{"rule"}),
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_lock_acquire_total",
			Help: "Lock requests by outcome: acquired, timeout, deadlock, unavailable, error.",
		}, []string{"rule", "result"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockproxy_lock_hold_seconds", Buckets: buckets,
			Help: "Time a lock was held, from grant to release or loss.",
		}, []string{"rule"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockproxy_locks_held", Help: "Keys held by this instance now.",
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockproxy_lock_waiters", Help: "Lock requests of this instance waiting now.",
		}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_lock_lease_lost_total",
			Help: "Leases lost while held (renewal failed or lock taken over).",
		}, []string{"rule"}),
	}
	for _, c := range []prometheus.Collector{m.wait, m.acquires, m.hold, m.held, m.waiters, m.lost} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveAcquire records the outcome of one Acquire that started at start:
// once per distinct rule among keys.
func (m *Metrics) ObserveAcquire(keys []Key, start time.Time, err error) {
	if m == nil {
		return
	}
	secs, result := time.Since(start).Seconds(), Result(err)
	eachRule(keys, func(rule string) {
		m.wait.WithLabelValues(rule).Observe(secs)
		m.acquires.WithLabelValues(rule, result).Inc()
	})
}

func (m *Metrics) addWaiters(n int) {
	if m != nil {
		m.waiters.Add(float64(n))
	}
}

func (m *Metrics) addHeld(n int) {
	if m != nil {
		m.held.Add(float64(n))
	}
}

func (m *Metrics) observeEnd(l *Lease, lost bool) {
	if m == nil {
		return
	}
	m.held.Sub(float64(len(l.keys)))
	secs := time.Since(l.granted).Seconds()
	eachRule(l.keys, func(rule string) {
		m.hold.WithLabelValues(rule).Observe(secs)
		if lost {
			m.lost.WithLabelValues(rule).Inc()
		}
	})
}

// eachRule calls f once for every distinct rule in keys.
func eachRule(keys []Key, f func(rule string)) {
	for i, k := range keys {
		seen := false
		for _, p := range keys[:i] {
			if p.Rule == k.Rule {
				seen = true
				break
			}
		}
		if !seen {
			f(k.Rule)
		}
	}
}
