package proxy

import (
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// combineMetrics are hot-row combining's series (docs/metrics.md).
type combineMetrics struct {
	// combined counts statements answered from a batch of two or more.
	combined *prometheus.CounterVec
	// batchSize observes every batch a combining rule runs, one for a
	// statement that found its row idle.
	batchSize *prometheus.HistogramVec
	// unknown counts batches whose COMMIT outcome the backend did not
	// tell, by what lockproxy then found.
	unknown *prometheus.CounterVec
}

func newCombineMetrics(reg prometheus.Registerer) combineMetrics {
	m := combineMetrics{
		combined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_combined_statements_total",
			Help: "UPDATEs answered from a combined batch of two or more (one transaction per batch), by rule.",
		}, []string{"rule"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockproxy_combine_batch_size",
			Help:    "Statements per batch a combining rule ran (1: the row was idle and the statement ran as sent).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}, []string{"rule"}),
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_combine_commit_unknown_total",
			Help: "Combined batches whose connection died after COMMIT was sent, by rule and what re-reading the row found (committed|rolled_back|no_change|unknown).",
		}, []string{"rule", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.combined, m.batchSize, m.unknown)
	}
	return m
}

// init creates the series of every combining rule at 0.
func (m combineMetrics) init(cfg *rules.Config) {
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if r.Combine == nil {
			continue
		}
		m.combined.WithLabelValues(r.Name)
		m.batchSize.WithLabelValues(r.Name)
	}
}

// observe records a batch of n statements.
func (m combineMetrics) observe(rule string, n int) {
	m.batchSize.WithLabelValues(rule).Observe(float64(n))
}
