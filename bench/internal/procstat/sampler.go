package procstat

import (
	"sync"
	"time"
)

// Sample is one RSS reading, At after the sampler started.
type Sample struct {
	At  time.Duration
	RSS uint64
}

// Sampler reads a process's VmRSS at a fixed interval in its own goroutine
// from Start until Stop. Stop may be called once; it is safe to call from
// another goroutine than Start's.
type Sampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []Sample
	peak    uint64
	err     error
}

// StartSampler begins sampling pid every interval.
func StartSampler(pid int, interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop(pid, interval)
	return s
}

func (s *Sampler) loop(pid int, interval time.Duration) {
	defer close(s.done)
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.read(pid, time.Since(start))
		select {
		case <-s.stop:
			s.read(pid, time.Since(start))
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) read(pid int, at time.Duration) {
	m, err := ReadMem(pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.samples = append(s.samples, Sample{At: at, RSS: m.RSS})
	s.peak = max(s.peak, m.RSS)
}

// Stop ends sampling and returns the samples, the highest RSS seen, and the
// first read error, if any.
func (s *Sampler) Stop() ([]Sample, uint64, error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.peak, s.err
}
