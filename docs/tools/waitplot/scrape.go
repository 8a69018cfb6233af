package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// sample is one scrape of the series the chart needs.
type sample struct {
	at       time.Time
	wait     map[string][]bucket // rule -> lockproxy_lock_wait_seconds buckets
	acquires map[string]float64  // "rule result" -> lockproxy_lock_acquire_total
	waiters  float64
}

// scrapeUntil scrapes /metrics every second until end, and captures the
// example outputs once, in the middle of the hot phase.
func scrapeUntil(ctx context.Context, o options, db *sql.DB, start, end time.Time) ([]sample, error) {
	var out []sample
	captured := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s, err := scrape(ctx, o.admin+"/metrics")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if !captured && time.Since(start) >= o.phase*3/2 {
			captured = true
			if err := captureExamples(ctx, o, db); err != nil {
				return nil, err
			}
		}
		if time.Now().After(end) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// settle waits until lockproxy has seen every client go and holds and
// waits for nothing, so the saved series end at rest.
func settle(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		body, err := fetch(ctx, url)
		if err != nil {
			return err
		}
		rest := true
		for _, want := range []string{"\nlockproxy_client_connections 0\n", "\nlockproxy_locks_held 0\n", "\nlockproxy_lock_waiters 0\n"} {
			rest = rest && strings.Contains(string(body), want)
		}
		if rest {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v lockproxy still has clients, locks held or waiters", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func scrape(ctx context.Context, url string) (sample, error) {
	body, err := fetch(ctx, url)
	if err != nil {
		return sample{}, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytesReader(body))
	if err != nil {
		return sample{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	s := sample{at: time.Now(), wait: map[string][]bucket{}, acquires: map[string]float64{}}
	for _, m := range mfs["lockproxy_lock_wait_seconds"].GetMetric() {
		var bs []bucket
		for _, b := range m.GetHistogram().GetBucket() {
			bs = append(bs, bucket{b.GetUpperBound(), float64(b.GetCumulativeCount())})
		}
		bs = append(bs, bucket{math.Inf(1), float64(m.GetHistogram().GetSampleCount())})
		s.wait[label(m, "rule")] = bs
	}
	for _, m := range mfs["lockproxy_lock_acquire_total"].GetMetric() {
		s.acquires[label(m, "rule")+" "+label(m, "result")] = m.GetCounter().GetValue()
	}
	for _, m := range mfs["lockproxy_lock_waiters"].GetMetric() {
		s.waiters = m.GetGauge().GetValue()
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// point is one interval of one rule: the quantiles of the waits that ended
// in it and the acquisition rates, as PromQL's histogram_quantile and rate
// over the interval would give them.
type point struct {
	t             float64 // seconds since the workload started, end of the interval
	rule          string
	p50, p99      float64 // seconds; NaN without observations
	acquired, out float64 // per second: granted, and timed out
	waiters       float64 // at the end of the interval
}

func quantileSeries(samples []sample, start time.Time) []point {
	var pts []point
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		secs := cur.at.Sub(prev.at).Seconds()
		rules := make([]string, 0, len(cur.wait))
		for r := range cur.wait {
			rules = append(rules, r)
		}
		sort.Strings(rules)
		for _, r := range rules {
			d := delta(prev.wait[r], cur.wait[r])
			pts = append(pts, point{
				t: cur.at.Sub(start).Seconds(), rule: r,
				p50: quantile(0.5, d), p99: quantile(0.99, d),
				acquired: (cur.acquires[r+" acquired"] - prev.acquires[r+" acquired"]) / secs,
				out:      (cur.acquires[r+" timeout"] - prev.acquires[r+" timeout"]) / secs,
				waiters:  cur.waiters,
			})
		}
	}
	return pts
}

func delta(prev, cur []bucket) []bucket {
	out := make([]bucket, len(cur))
	for i, b := range cur {
		out[i] = b
		if i < len(prev) {
			out[i].count -= prev[i].count
		}
	}
	return out
}

// quantile is Prometheus' histogram_quantile on cumulative buckets (the
// last one +Inf): linear interpolation inside the bucket the rank falls in.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	lower, below := 0.0, 0.0
	for i, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				if i == 0 {
					return math.NaN()
				}
				return bs[i-1].le
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return math.NaN()
}
