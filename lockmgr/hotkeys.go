package lockmgr

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Hot-key tracking: the keys this instance's sessions waited for longest
// over the last one to two minutes, exported as a bounded top-K gauge.
const (
	hotKeyWindow = time.Minute
	hotKeyTop    = 10    // series exported
	hotKeyCap    = 10000 // keys tracked per window; more are not counted
)

// hotKeys sums finished waits per key over two rotating windows and
// exports the top hotKeyTop of their sum. Safe for concurrent use.
type hotKeys struct {
	desc *prometheus.Desc

	mu        sync.Mutex
	start     time.Time // of the current window
	cur, prev map[string]hotKey
}

type hotKey struct {
	rule string
	secs float64
}

func newHotKeys() *hotKeys {
	return &hotKeys{
		desc: prometheus.NewDesc("lockproxy_lock_hot_key_wait_seconds",
			"Seconds this instance's lock requests spent waiting for a key over the last 1-2 minutes; only the 10 keys waited for longest are exported.",
			[]string{"rule", "key"}, nil),
		start: time.Now(), cur: map[string]hotKey{}, prev: map[string]hotKey{},
	}
}

// rotateLocked moves to the window that contains now.
func (h *hotKeys) rotateLocked(now time.Time) {
	switch d := now.Sub(h.start); {
	case d >= 2*hotKeyWindow:
		h.prev, h.cur, h.start = map[string]hotKey{}, map[string]hotKey{}, now
	case d >= hotKeyWindow:
		h.prev, h.cur, h.start = h.cur, map[string]hotKey{}, h.start.Add(hotKeyWindow)
	}
}

func (h *hotKeys) add(k Key, waited time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rotateLocked(time.Now())
	e, ok := h.cur[k.Name]
	if !ok && len(h.cur) >= hotKeyCap {
		return
	}
	h.cur[k.Name] = hotKey{rule: k.Rule, secs: e.secs + waited.Seconds()}
}

// hotEntry is one key of the top list.
type hotEntry struct {
	key, rule string
	secs      float64
}

// top returns the keys waited for longest over both windows, at most n.
func (h *hotKeys) top(n int) []hotEntry {
	h.mu.Lock()
	h.rotateLocked(time.Now())
	sum := make(map[string]hotKey, len(h.cur)+len(h.prev))
	for _, w := range []map[string]hotKey{h.prev, h.cur} {
		for k, e := range w {
			sum[k] = hotKey{rule: e.rule, secs: sum[k].secs + e.secs}
		}
	}
	h.mu.Unlock()
	out := make([]hotEntry, 0, len(sum))
	for k, e := range sum {
		out = append(out, hotEntry{key: k, rule: e.rule, secs: e.secs})
	}
	slices.SortFunc(out, func(a, b hotEntry) int {
		if c := cmp.Compare(b.secs, a.secs); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return out[:min(n, len(out))]
}

// Describe implements prometheus.Collector.
func (h *hotKeys) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector.
func (h *hotKeys) Collect(ch chan<- prometheus.Metric) {
	for _, e := range h.top(hotKeyTop) {
		ch <- prometheus.MustNewConstMetric(h.desc, prometheus.GaugeValue, e.secs, e.rule, e.key)
	}
}
