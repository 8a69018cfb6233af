package contend

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// LockMetrics are the sums of lockproxy's lock histograms over all rules
// (lockproxy_lock_wait_seconds, lockproxy_lock_hold_seconds).
// Plain data.
type LockMetrics struct {
	WaitSum, WaitCount float64
	HoldSum, HoldCount float64
}

// Sub is m - o, field by field.
func (m LockMetrics) Sub(o LockMetrics) LockMetrics {
	return LockMetrics{m.WaitSum - o.WaitSum, m.WaitCount - o.WaitCount, m.HoldSum - o.HoldSum, m.HoldCount - o.HoldCount}
}

// Add is m + o, field by field.
func (m LockMetrics) Add(o LockMetrics) LockMetrics {
	return LockMetrics{m.WaitSum + o.WaitSum, m.WaitCount + o.WaitCount, m.HoldSum + o.HoldSum, m.HoldCount + o.HoldCount}
}

// ParseLockMetrics reads the _sum and _count of the two histograms out of
// Prometheus text exposition, adding up every label set.
func ParseLockMetrics(text string) (LockMetrics, error) {
	var m LockMetrics
	targets := map[string]*float64{
		"lockproxy_lock_wait_seconds_sum": &m.WaitSum, "lockproxy_lock_wait_seconds_count": &m.WaitCount,
		"lockproxy_lock_hold_seconds_sum": &m.HoldSum, "lockproxy_lock_hold_seconds_count": &m.HoldCount,
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		dst, ok := targets[name]
		if !ok {
			continue
		}
		f := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(f) == 0 {
			return m, fmt.Errorf("contend: metrics line without value: %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return m, fmt.Errorf("contend: metrics line %q: %w", line, err)
		}
		*dst += v
	}
	return m, sc.Err()
}

// ScrapeLocks sums LockMetrics over the instances' /metrics.
func ScrapeLocks(ctx context.Context, ps []*env.Proxy) (LockMetrics, error) {
	var total LockMetrics
	client := &http.Client{Timeout: 5 * time.Second}
	for _, p := range ps {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.AdminAddr+"/metrics", nil)
		if err != nil {
			return total, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return total, fmt.Errorf("contend: scrape %s: %w", p.AdminAddr, err)
		}
		var b strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&b)
		_ = resp.Body.Close()
		if err != nil {
			return total, fmt.Errorf("contend: scrape %s: %w", p.AdminAddr, err)
		}
		m, err := ParseLockMetrics(b.String())
		if err != nil {
			return total, err
		}
		total = total.Add(m)
	}
	return total, nil
}

// LockFigures turns the lock metrics of a run of seconds into mean wait
// and hold per acquisition (ms) and the share of the run some session held
// a lock (for one hot key: how busy the lock was; 1 - busy is the time it
// spent being handed over).
func LockFigures(d LockMetrics, seconds float64) (waitMs, holdMs, busy float64) {
	return 1000 * Ratio(d.WaitSum, d.WaitCount), 1000 * Ratio(d.HoldSum, d.HoldCount), Ratio(d.HoldSum, seconds)
}
