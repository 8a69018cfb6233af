package router

import (
	"errors"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// metrics are the router's Prometheus series (see the package comment).
type metrics struct {
	healthy *prometheus.GaugeVec
	lag     *prometheus.GaugeVec
	up      *prometheus.GaugeVec
	checks  *prometheus.CounterVec
}

// newMetrics creates the router metrics on reg. A collector reg already
// holds (another Router on the same registry) is shared; any other
// registration failure is logged and the metric is kept unexported, since
// routing must not fail for want of a metric.
func newMetrics(reg prometheus.Registerer, log *zap.Logger) *metrics {
	m := &metrics{
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockproxy_replica_healthy",
			Help: "1 when the replica may take reads (replicating, lag known and within max_replica_lag), else 0.",
		}, []string{"backend"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockproxy_replica_lag_seconds",
			Help: "Seconds_Behind_Master at the last check; NaN while unknown (replication stopped, NULL lag, check failed).",
		}, []string{"backend"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockproxy_backend_up",
			Help: "1 when the last health check connected and the backend answered, else 0.",
		}, []string{"backend", "role"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_health_checks_total",
			Help: "Backend health checks by result: ok, unhealthy (answered but unfit for reads), error (connect or query failed).",
		}, []string{"backend", "result"}),
	}
	m.healthy = register(reg, log, m.healthy)
	m.lag = register(reg, log, m.lag)
	m.up = register(reg, log, m.up)
	m.checks = register(reg, log, m.checks)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, log *zap.Logger, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Error("router: metric not registered", zap.Error(err))
	return c
}

// observe records one check (result non-empty) or a state change.
func (m *metrics) observe(b *backend, st state, result string) {
	if result != "" {
		m.checks.WithLabelValues(b.addr, result).Inc()
	}
	m.up.WithLabelValues(b.addr, string(b.role)).Set(boolGauge(st.up))
	if b.role != RoleReplica {
		return
	}
	m.healthy.WithLabelValues(b.addr).Set(boolGauge(st.healthy))
	lag := math.NaN()
	if st.lagKnown {
		lag = st.lag.Seconds()
	}
	m.lag.WithLabelValues(b.addr).Set(lag)
}

// forget drops the series of a backend that is no longer configured.
func (m *metrics) forget(b *backend) {
	m.up.DeleteLabelValues(b.addr, string(b.role))
	m.checks.DeletePartialMatch(prometheus.Labels{"backend": b.addr})
	if b.role == RoleReplica {
		m.healthy.DeleteLabelValues(b.addr)
		m.lag.DeleteLabelValues(b.addr)
	}
}

func boolGauge(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
