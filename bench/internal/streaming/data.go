package streaming

import (
	"fmt"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Paths and readers of a run.
const (
	Direct = "direct"
	Proxy  = "proxy"
	Fast   = "fast"
	Slow   = "slow"
)

// Point is one RSS sample: seconds since the query started, MiB resident.
type Point struct {
	At    float64 `json:"t"`
	RSSMB float64 `json:"rss_mb"`
}

// Run is one full read of the table.
type Run struct {
	Path    string  `json:"path"`   // direct | proxy
	Reader  string  `json:"reader"` // fast | slow
	Round   int     `json:"round"`
	Rows    int     `json:"rows"`
	Bytes   int64   `json:"bytes"` // column payload the client received
	Seconds float64 `json:"seconds"`
	// Proxy runs only: lockproxy's memory, bytes.
	BaselineRSS uint64  `json:"baseline_rss,omitempty"`
	PeakRSS     uint64  `json:"peak_rss,omitempty"`
	BaselineHWM uint64  `json:"baseline_hwm,omitempty"`
	EndHWM      uint64  `json:"end_hwm,omitempty"`
	Growth      uint64  `json:"growth,omitempty"`
	Samples     []Point `json:"samples,omitempty"`
}

func (r Run) String() string {
	s := fmt.Sprintf("%-6s %-4s round %d: %d rows, %.0f MB in %.2f s", r.Path, r.Reader, r.Round, r.Rows, float64(r.Bytes)/1e6, r.Seconds)
	if r.Path == Proxy {
		s += fmt.Sprintf("; RSS %.1f -> peak %.1f MiB, growth %.1f MiB", mb(r.BaselineRSS), mb(r.PeakRSS), mb(r.Growth))
	}
	return s
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// Data is the streaming scenario's result data.
type Data struct {
	Rows       int     `json:"rows"`
	SleepEvery int     `json:"slow_sleep_every_rows"`
	SleepMs    float64 `json:"slow_sleep_ms"`
	SampleMs   float64 `json:"sample_interval_ms"`
	Runs       []Run   `json:"runs"`
	// Medians and worst cases over the runs.
	DirectSeconds    float64 `json:"direct_seconds"`
	ProxySeconds     float64 `json:"proxy_seconds"`
	TimeRatio        float64 `json:"time_ratio"` // proxy / direct, fast reader
	FastGrowthMB     float64 `json:"fast_growth_mb_max"`
	SlowGrowthMB     float64 `json:"slow_growth_mb_max"`
	SlowSeconds      float64 `json:"slow_seconds"`
	BaselineMB       float64 `json:"baseline_mb"`
	ResultMB         float64 `json:"result_mb"`
	DirectRowsPerSec float64 `json:"direct_rows_per_sec"`
	ProxyRowsPerSec  float64 `json:"proxy_rows_per_sec"`
}

func (d *Data) summarize() {
	var direct, proxy, slow, base []float64
	for _, r := range d.Runs {
		switch {
		case r.Path == Direct:
			direct = append(direct, r.Seconds)
		case r.Reader == Fast:
			proxy = append(proxy, r.Seconds)
			d.FastGrowthMB = max(d.FastGrowthMB, mb(r.Growth))
		default:
			slow = append(slow, r.Seconds)
			d.SlowGrowthMB = max(d.SlowGrowthMB, mb(r.Growth))
		}
		if r.Path == Proxy {
			base = append(base, mb(r.BaselineRSS))
		}
		d.ResultMB = float64(r.Bytes) / 1e6
	}
	d.DirectSeconds, d.ProxySeconds = results.Median(direct), results.Median(proxy)
	d.SlowSeconds, d.BaselineMB = results.Median(slow), results.Median(base)
	if d.DirectSeconds > 0 {
		d.TimeRatio = d.ProxySeconds / d.DirectSeconds
		d.DirectRowsPerSec = float64(d.Rows) / d.DirectSeconds
	}
	if d.ProxySeconds > 0 {
		d.ProxyRowsPerSec = float64(d.Rows) / d.ProxySeconds
	}
}

func (d *Data) targets() []results.Target {
	return []results.Target{
		{Name: "lockproxy RSS growth, fast reader (worst run)", Want: fmt.Sprintf("< %.0f MiB", TargetGrowthMB),
			Got: fmt.Sprintf("%.1f MiB", d.FastGrowthMB), Met: d.FastGrowthMB < TargetGrowthMB},
		{Name: "lockproxy RSS growth, slow reader (worst run)", Want: fmt.Sprintf("< %.0f MiB", TargetGrowthMB),
			Got: fmt.Sprintf("%.1f MiB", d.SlowGrowthMB), Met: d.SlowGrowthMB < TargetGrowthMB},
	}
}
