package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/procstat"
)

// gauges are the series the soak samples from each instance's /metrics, in
// CSV column order.
var gauges = []string{
	"go_goroutines",
	"process_open_fds",
	"process_resident_memory_bytes",
	"go_memstats_heap_inuse_bytes",
	"lockproxy_client_connections",
	"lockproxy_locks_held",
	"lockproxy_lock_waiters",
}

// point is one exposed series: its label set as written (without braces)
// and its value.
type point struct {
	labels string
	value  float64
}

// exposition is a parsed Prometheus text exposition: every series by metric
// name.
type exposition map[string][]point

// parseExposition reads the Prometheus text format. Comment lines are
// skipped; a line that cannot be read is an error naming it.
func parseExposition(r io.Reader) (exposition, error) {
	m := exposition{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest, err := splitSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %d %q: no value", n, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		m[name] = append(m[name], point{labels: labels, value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// splitSeries splits `name{labels} rest` or `name rest`; label values may
// hold spaces, braces and escaped quotes.
func splitSeries(line string) (name, labels, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", "", "", fmt.Errorf("no metric name")
	}
	name = line[:i]
	if line[i] != '{' {
		return name, "", line[i:], nil
	}
	inQuote, esc := false, false
	for j := i + 1; j < len(line); j++ {
		c := line[j]
		switch {
		case esc:
			esc = false
		case c == '\\' && inQuote:
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return name, line[i+1 : j], line[j+1:], nil
		}
	}
	return "", "", "", fmt.Errorf("unterminated label set")
}

// sum adds the values of name's series whose label set contains every one
// of the given `label="value"` pairs; absent series sum to 0.
func (m exposition) sum(name string, match ...string) float64 {
	var s float64
	for _, p := range m[name] {
		ok := true
		for _, want := range match {
			if !strings.Contains(p.labels, want) {
				ok = false
				break
			}
		}
		if ok {
			s += p.value
		}
	}
	return s
}

// has reports whether name is exposed at all.
func (m exposition) has(name string) bool { return len(m[name]) > 0 }

// scraper reads one instance's /metrics. A fresh connection per scrape
// (no keep-alive) makes every reading count the same one admin connection.
type scraper struct {
	client *http.Client
}

func newScraper() *scraper {
	return &scraper{client: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
}

// scrape fetches and parses http://adminAddr/metrics.
func (s *scraper) scrape(ctx context.Context, adminAddr string) (exposition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: HTTP %d", adminAddr, resp.StatusCode)
	}
	m, err := parseExposition(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	for _, g := range gauges {
		if !m.has(g) {
			return nil, fmt.Errorf("metrics %s: %s not exposed", adminAddr, g)
		}
	}
	return m, nil
}

// Phases of a soak run; every sample carries the one it was taken in.
const (
	phaseWarmup    = "warmup"
	phaseIdleStart = "idle-start"
	phaseLoad      = "load"
	phaseIdleEnd   = "idle-end"
)

// sample is one reading of one instance.
type sample struct {
	Elapsed  time.Duration
	Phase    string
	Instance int
	Gauges   map[string]float64 // by name in gauges
	HWM      uint64             // VmHWM from /proc: peak resident so far
	CPUPct   float64            // the instance's CPU since the previous sample, % of one core
	HostBusy float64            // host CPU busy share since the previous sample, 0..1
	Full     exposition         // the whole exposition, for counters
}

// target is what the sampler reads: an instance's admin address and pid.
type target struct {
	admin string
	pid   int
}

// sampler keeps the series of every instance. Safe for concurrent use.
type sampler struct {
	targets []target
	start   time.Time
	scr     *scraper

	mu         sync.Mutex
	phase      string
	samples    []sample
	lastCPU    []time.Duration
	lastAt     []time.Time
	lastPct    []float64
	lastHost   procstat.HostCPU
	lastHostAt time.Time
	lastBusy   float64
	errs       int
	lastErr    error
}

func newSampler(targets []target, start time.Time) *sampler {
	s := &sampler{targets: targets, start: start, scr: newScraper(), phase: phaseWarmup,
		lastCPU: make([]time.Duration, len(targets)), lastAt: make([]time.Time, len(targets)), lastPct: make([]float64, len(targets))}
	s.lastHost, _ = procstat.ReadHostCPU()
	s.lastHostAt = time.Now()
	for i, t := range targets {
		s.lastCPU[i], _ = procstat.CPUTime(t.pid)
		s.lastAt[i] = time.Now()
	}
	return s
}

// setPhase tags the samples taken from now on.
func (s *sampler) setPhase(p string) {
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
}

// readAll takes one sample of every instance and returns them.
func (s *sampler) readAll(ctx context.Context) ([]sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// CPU shares over less than a second (an extra sample right after a
	// regular one) are noise: such a sample repeats the previous share.
	now := time.Now()
	if now.Sub(s.lastHostAt) >= time.Second {
		host, _ := procstat.ReadHostCPU()
		s.lastBusy = procstat.BusyShare(s.lastHost, host)
		s.lastHost, s.lastHostAt = host, now
	}
	busy := s.lastBusy
	out := make([]sample, 0, len(s.targets))
	for i, t := range s.targets {
		m, err := s.scr.scrape(ctx, t.admin)
		if err != nil {
			if ctx.Err() == nil { // not a scrape cut short by the end of the run
				s.errs++
				s.lastErr = err
			}
			return nil, err
		}
		sm := sample{Elapsed: time.Since(s.start), Phase: s.phase, Instance: i, Gauges: map[string]float64{}, HostBusy: busy, Full: m}
		for _, g := range gauges {
			sm.Gauges[g] = m.sum(g)
		}
		if mem, err := procstat.ReadMem(t.pid); err == nil {
			sm.HWM = mem.HWM
		}
		if d := now.Sub(s.lastAt[i]); d >= time.Second {
			if cpu, err := procstat.CPUTime(t.pid); err == nil {
				s.lastPct[i] = 100 * float64(cpu-s.lastCPU[i]) / float64(d)
				s.lastCPU[i], s.lastAt[i] = cpu, now
			}
		}
		sm.CPUPct = s.lastPct[i]
		out = append(out, sm)
	}
	s.samples = append(s.samples, out...)
	return out, nil
}

// run samples every interval until ctx ends.
func (s *sampler) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.readAll(ctx)
		}
	}
}

// all returns a copy of the samples so far.
func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

// lastOf returns up to n most recent samples of instance i in phase.
func lastOf(samples []sample, phase string, i, n int) []sample {
	var out []sample
	for k := len(samples) - 1; k >= 0 && len(out) < n; k-- {
		if samples[k].Phase == phase && samples[k].Instance == i {
			out = append(out, samples[k])
		}
	}
	return out
}

// medianGauge is the median of gauge g over samples (0 for none).
func medianGauge(samples []sample, g string) float64 {
	if len(samples) == 0 {
		return 0
	}
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = s.Gauges[g]
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// writeCSV writes the series: elapsed_s, instance, phase, every gauge,
// hwm_bytes, cpu_pct, host_busy_pct.
func writeCSV(path string, samples []sample) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	if err := renderCSV(f, samples); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// renderCSV writes the CSV of samples to w.
func renderCSV(w io.Writer, samples []sample) error {
	cw := csv.NewWriter(w)
	head := append([]string{"elapsed_s", "instance", "phase"}, gauges...)
	head = append(head, "hwm_bytes", "cpu_pct", "host_busy_pct")
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	for _, s := range samples {
		row := []string{strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 1, 64), strconv.Itoa(s.Instance), s.Phase}
		for _, g := range gauges {
			row = append(row, strconv.FormatFloat(s.Gauges[g], 'f', -1, 64))
		}
		row = append(row, strconv.FormatUint(s.HWM, 10),
			strconv.FormatFloat(s.CPUPct, 'f', 1, 64), strconv.FormatFloat(100*s.HostBusy, 'f', 1, 64))
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}
