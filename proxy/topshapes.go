package proxy

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// Top shapes: per rule in observe mode, the statement shapes (literals as
// "?") it would have refused or made wait most often, exported as a
// bounded top-N gauge and on /debug/observed. A shape is never counted in
// lockproxy_observed_total's labels (unbounded); here each rule and outcome
// keeps at most shapeTracked shapes (the space-saving algorithm: a new
// shape takes the place of the least counted one and inherits its count)
// and exports the shapeTop most counted.
const (
	shapeTop      = 10  // series exported per rule and outcome
	shapeTracked  = 100 // shapes counted per rule and outcome
	shapeLabelMax = 200 // bytes of a shape label, "..." included
)

// shapeOutcomes are the outcomes whose shapes are ranked.
var shapeOutcomes = []string{wouldRefuse, wouldWait}

type shapeGroup struct{ rule, outcome string }

type shapeKey struct{ reason, shape string }

// shapeCount is one tracked shape: count statements counted for it, of
// which at most over were counted for the shapes it replaced.
type shapeCount struct {
	count, over uint64
}

// topShapes ranks observed shapes. Safe for concurrent use.
type topShapes struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	groups map[shapeGroup]map[shapeKey]*shapeCount
}

func newTopShapes() *topShapes {
	return &topShapes{
		desc: prometheus.NewDesc("lockproxy_observed_top_shapes",
			"Statements counted since start per shape (literals as ?, cut to 200 bytes) for the 10 shapes each rule in observe mode would have refused (by reason) or made wait most often.",
			[]string{"rule", "outcome", "reason", "shape"}, nil),
		groups: map[shapeGroup]map[shapeKey]*shapeCount{},
	}
}

// shapeLabel is the label value of a redacted shape: valid UTF-8, at most
// shapeLabelMax bytes, cut at a character boundary.
func shapeLabel(shape string) string {
	if shape == "" {
		return "(no text)"
	}
	shape = strings.ToValidUTF8(shape, "\uFFFD")
	if len(shape) <= shapeLabelMax {
		return shape
	}
	cut := shapeLabelMax - len("...")
	for cut > 0 && !utf8.RuneStart(shape[cut]) {
		cut--
	}
	return shape[:cut] + "..."
}

// add counts one statement of shape (already redacted: every literal as
// "?") under the rule, outcome and reason.
func (t *topShapes) add(rule, outcome, reason, shape string) {
	k := shapeKey{reason, shapeLabel(shape)}
	g := shapeGroup{rule, outcome}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.groups[g]
	if m == nil {
		m = make(map[shapeKey]*shapeCount, shapeTracked)
		t.groups[g] = m
	}
	if c := m[k]; c != nil {
		c.count++
		return
	}
	if len(m) < shapeTracked {
		m[k] = &shapeCount{count: 1}
		return
	}
	var minK shapeKey
	var minC *shapeCount
	for k, c := range m {
		if minC == nil || c.count < minC.count || c.count == minC.count && keyLess(k, minK) {
			minK, minC = k, c
		}
	}
	delete(m, minK)
	m[k] = &shapeCount{count: minC.count + 1, over: minC.count}
}

func keyLess(a, b shapeKey) bool {
	return cmp.Or(cmp.Compare(a.reason, b.reason), cmp.Compare(a.shape, b.shape)) < 0
}

// keep drops the shapes of rules cfg no longer has in observe mode.
func (t *topShapes) keep(cfg *rules.Config) {
	observing := map[string]bool{}
	for _, r := range cfg.Rules {
		observing[r.Name] = r.Observes()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for g := range t.groups {
		if !observing[g.rule] {
			delete(t.groups, g)
		}
	}
}

// ObservedShape is one ranked shape, as /debug/observed shows it.
type ObservedShape struct {
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Shape   string `json:"shape"`
	Count   uint64 `json:"count"`
	// Over bounds how much of Count may belong to other shapes (0: exact);
	// non-zero only once a rule and outcome has had more than 100 shapes.
	Over uint64 `json:"over_count,omitempty"`
}

// top returns, per rule and outcome, the n shapes counted most, ordered
// by rule, outcome and then count, highest first.
func (t *topShapes) top(n int) []ObservedShape {
	var out []ObservedShape
	t.mu.Lock()
	for g, m := range t.groups {
		var list []ObservedShape
		for k, c := range m {
			list = append(list, ObservedShape{Rule: g.rule, Outcome: g.outcome, Reason: k.reason, Shape: k.shape, Count: c.count, Over: c.over})
		}
		slices.SortFunc(list, byCount)
		out = append(out, list[:min(n, len(list))]...)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b ObservedShape) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Outcome, b.Outcome), byCount(a, b))
	})
	return out
}

func byCount(a, b ObservedShape) int {
	return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Shape, b.Shape))
}

// Describe implements prometheus.Collector.
func (t *topShapes) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector.
func (t *topShapes) Collect(ch chan<- prometheus.Metric) {
	for _, s := range t.top(shapeTop) {
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, float64(s.Count), s.Rule, s.Outcome, s.Reason, s.Shape)
	}
}

// ObservedShapes lists, per rule in observe mode and outcome (would_refuse,
// would_wait), the 10 statement shapes counted most since start: what
// lockproxy_observed_top_shapes exports and /debug/observed shows.
func (s *Server) ObservedShapes() []ObservedShape {
	return s.metrics.shapes.top(shapeTop)
}

// DebugObserved serves /debug/observed as JSON.
func (s *Server) DebugObserved() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		shapes := s.ObservedShapes()
		if shapes == nil {
			shapes = []ObservedShape{}
		}
		_ = enc.Encode(struct {
			Instance string          `json:"instance"`
			Shapes   []ObservedShape `json:"shapes"`
		}{s.instance, shapes})
	})
}
