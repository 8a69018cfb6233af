package sampling

import (
	"context"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/procstat"
)

// Phases of a soak run; every sample carries the one it was taken in.
const (
	// PhaseWarmup is the warm-up, cache priming included.
	PhaseWarmup = "warmup"
	// PhaseIdleStart is the drain after the warm-up.
	PhaseIdleStart = "idle-start"
	// PhaseLoad is the measured run.
	PhaseLoad = "load"
	// PhaseIdleEnd is the drain after the measured run.
	PhaseIdleEnd = "idle-end"
)

// Sample is one reading of one instance.
type Sample struct {
	Elapsed  time.Duration
	Phase    string
	Instance int
	Gauges   map[string]float64 // by name in Gauges
	HWM      uint64             // VmHWM from /proc: peak resident so far
	CPUPct   float64            // the instance's CPU since the previous sample, % of one core
	HostBusy float64            // host CPU busy share since the previous sample, 0..1
	Full     Exposition         // the whole exposition, for counters
}

// Target is what the sampler reads of one instance: its admin address
// (for /metrics) and its pid (for /proc).
type Target struct {
	Admin string
	PID   int
}

// Sampler keeps the series of every instance. Safe for concurrent use.
type Sampler struct {
	targets []Target
	start   time.Time
	scr     *scraper

	mu         sync.Mutex
	phase      string
	samples    []Sample
	lastCPU    []time.Duration
	lastAt     []time.Time
	lastPct    []float64
	lastHost   procstat.HostCPU
	lastHostAt time.Time
	lastBusy   float64
	errs       int
	lastErr    error
}

// NewSampler returns a sampler of targets whose samples count their
// elapsed time from start, in PhaseWarmup until SetPhase.
func NewSampler(targets []Target, start time.Time) *Sampler {
	s := &Sampler{targets: targets, start: start, scr: newScraper(), phase: PhaseWarmup,
		lastCPU: make([]time.Duration, len(targets)), lastAt: make([]time.Time, len(targets)), lastPct: make([]float64, len(targets))}
	s.lastHost, _ = procstat.ReadHostCPU()
	s.lastHostAt = time.Now()
	for i, t := range targets {
		s.lastCPU[i], _ = procstat.CPUTime(t.PID)
		s.lastAt[i] = time.Now()
	}
	return s
}

// Instances is the number of targets.
func (s *Sampler) Instances() int { return len(s.targets) }

// SetPhase tags the samples taken from now on.
func (s *Sampler) SetPhase(p string) {
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
}

// ReadAll takes one sample of every instance, keeps and returns them. A
// failed scrape fails the whole reading and, unless ctx has ended, is
// counted (see Failures).
func (s *Sampler) ReadAll(ctx context.Context) ([]Sample, error) {
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
	out := make([]Sample, 0, len(s.targets))
	for i, t := range s.targets {
		m, err := s.scr.scrape(ctx, t.Admin)
		if err != nil {
			if ctx.Err() == nil { // not a scrape cut short by the end of the run
				s.errs++
				s.lastErr = err
			}
			return nil, err
		}
		sm := Sample{Elapsed: time.Since(s.start), Phase: s.phase, Instance: i, Gauges: map[string]float64{}, HostBusy: busy, Full: m}
		for _, g := range Gauges {
			sm.Gauges[g] = m.Sum(g)
		}
		if mem, err := procstat.ReadMem(t.PID); err == nil {
			sm.HWM = mem.HWM
		}
		if d := now.Sub(s.lastAt[i]); d >= time.Second {
			if cpu, err := procstat.CPUTime(t.PID); err == nil {
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

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.ReadAll(ctx)
		}
	}
}

// All returns a copy of the samples so far.
func (s *Sampler) All() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// Failures is how many readings failed on a scrape, and the last failure.
func (s *Sampler) Failures() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs, s.lastErr
}
