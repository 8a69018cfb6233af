package lockmgr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock metrics of docs/metrics.md. One Metrics per registry;
// several Lockers may share it. A nil *Metrics records nothing. Safe for
// concurrent use.
type Metrics struct {
	wait     *prometheus.HistogramVec
	acquires *prometheus.CounterVec
	hold     *prometheus.HistogramVec
	held     prometheus.Gauge
	waiters  prometheus.Gauge
	lost     *prometheus.CounterVec
	handoff  *prometheus.HistogramVec
	granted  *prometheus.CounterVec
	local    *prometheus.CounterVec
	queue    *prometheus.HistogramVec
	renewals *prometheus.CounterVec
	hot      *hotKeys
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
		handoff: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockproxy_lock_handoff_seconds", Buckets: buckets,
			Help: "Time from the release that freed a key to its grant to a waiter of this instance.",
		}, []string{"rule"}),
		local: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_lock_local_handoffs_total",
			Help: "Locks passed from a releasing session to a waiting one of this instance without a round trip to the lock service.",
		}, []string{"rule"}),
		granted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_lock_release_grants_total",
			Help: "Locks the lock service granted to a waiting session of this instance in the release that freed them, taken without asking.",
		}, []string{"rule"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockproxy_lock_waiters_per_key",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
			Help:    "Requests waiting for a key (this one included) when a lock request starts to wait.",
		}, []string{"rule"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_lock_renewals_total",
			Help: "Lease renewals by result: ok, error (call failed, validity runs down), lost.",
		}, []string{"result"}),
		hot: newHotKeys(),
	}
	for _, c := range []prometheus.Collector{m.wait, m.acquires, m.hold, m.held, m.waiters, m.lost,
		m.handoff, m.local, m.granted, m.queue, m.renewals, m.hot} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{RenewOK, RenewError, RenewLost} {
		m.renewals.WithLabelValues(r)
	}
	return m, nil
}

// AcquireResults are the result label values of
// lockproxy_lock_acquire_total (see Result).
var AcquireResults = []string{"acquired", "timeout", "deadlock", "unavailable", "error"}

// InitRules creates, at 0, every series of the per-rule lock metrics for
// the named rules, so dashboards and alerts see 0 rather than nothing
// before the first event. Call it at start and after each reload (series
// of rules that went away stay until the process restarts).
func (m *Metrics) InitRules(rules []string) {
	if m == nil {
		return
	}
	for _, rule := range rules {
		m.wait.WithLabelValues(rule)
		m.hold.WithLabelValues(rule)
		m.lost.WithLabelValues(rule)
		m.handoff.WithLabelValues(rule)
		m.local.WithLabelValues(rule)
		m.granted.WithLabelValues(rule)
		m.queue.WithLabelValues(rule)
		for _, res := range AcquireResults {
			m.acquires.WithLabelValues(rule, res)
		}
	}
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

// observeHandoff records a hand-off of a key of rule: d from the moment
// this instance learned the key was released (its own release, or the lock
// service's notification) to the grant to the waiter it woke.
func (m *Metrics) observeHandoff(rule string, d time.Duration) {
	if m != nil {
		m.handoff.WithLabelValues(rule).Observe(d.Seconds())
	}
}

// ObserveLocalHandoff counts a key of rule passed to a waiter of this
// instance without a round trip to the lock service.
func (m *Metrics) ObserveLocalHandoff(rule string) {
	if m != nil {
		m.local.WithLabelValues(rule).Inc()
	}
}

// ObserveReleaseGrant counts a key of rule that the lock service granted
// to a waiter of this instance in the release that freed it (the waiter
// took it from the announcement, without a round trip).
func (m *Metrics) ObserveReleaseGrant(rule string) {
	if m != nil {
		m.granted.WithLabelValues(rule).Inc()
	}
}

// Renewal results for ObserveRenewals.
const (
	RenewOK    = "ok"    // the lock service extended the lease
	RenewError = "error" // the call failed; the lease's validity runs down
	RenewLost  = "lost"  // the lock service no longer had the lease as ours
)

// ObserveRenewals counts n lease renewals with result (RenewOK, RenewError
// or RenewLost). A backend that renews a session carrying several leases
// (etcd, ZooKeeper) counts one per session renewal.
func (m *Metrics) ObserveRenewals(result string, n int) {
	if m != nil && n > 0 {
		m.renewals.WithLabelValues(result).Add(float64(n))
	}
}

func (m *Metrics) observeQueue(rule string, n int) {
	if m != nil {
		m.queue.WithLabelValues(rule).Observe(float64(n))
	}
}

// observeWaited adds a finished wait for k to the hot-key top list.
func (m *Metrics) observeWaited(k Key, d time.Duration) {
	if m != nil {
		m.hot.add(k, d)
	}
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
