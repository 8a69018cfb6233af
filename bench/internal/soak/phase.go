package soak

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/soak/growth"
	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/soak/workload"
)

// Drain: after the clients close, how long the instances get to show no
// client connection, held lock or waiter, and how long they then rest
// before the idle snapshot.
const (
	drainTimeout = 15 * time.Second
	settleTime   = 3 * time.Second
)

// phase runs the workload for d (after priming the statement caches in the
// warm-up), takes one more sample and returns each instance's loaded
// snapshot (the median of its last samples of the phase) after stopping
// the workload and closing its pools.
func (r *run) phase(ctx context.Context, name string, d time.Duration) ([]growth.Snapshot, error) {
	start := time.Now()
	if name == sampling.PhaseWarmup {
		r.o.Log.Printf("soak: priming the statement caches with %d distinct texts per instance", workload.PrimeStatements)
		if err := workload.Prime(ctx, r.bed, r.addrs, r.t); err != nil {
			return nil, err
		}
	}
	w, err := workload.Start(ctx, r.bed, r.addrs, r.t)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	deadline := time.NewTimer(max(0, d-time.Since(start)))
	defer deadline.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			w.Halt()
			return nil, fmt.Errorf("soak: interrupted: %w", ctx.Err())
		case <-deadline.C:
			break wait
		case <-tick.C:
			r.progress(name, time.Since(start))
		}
	}
	_, err = r.smp.ReadAll(ctx)
	w.Halt()
	if err != nil {
		return nil, err
	}
	all := r.smp.All()
	out := make([]growth.Snapshot, len(r.addrs))
	for i := range r.addrs {
		last := sampling.LastOf(all, name, i, growth.LoadedSamples)
		out[i] = growth.Snapshot{}
		for _, g := range sampling.Gauges {
			out[i][g] = sampling.MedianGauge(last, g)
		}
	}
	return out, nil
}

// progress logs one line a minute.
func (r *run) progress(phase string, el time.Duration) {
	stmts, errs, _ := r.t.Snapshot()
	var n int64
	for _, v := range stmts {
		n += v
	}
	line := fmt.Sprintf("soak: %s %s: %d statements/operations, errors %v", phase, el.Round(time.Second), n, errs)
	all := r.smp.All()
	for i := range r.smp.Instances() {
		if l := sampling.LastOf(all, phase, i, 1); len(l) == 1 {
			g := l[0].Gauges
			line += fmt.Sprintf("; #%d goroutines %.0f fds %.0f rss %.1f MiB conns %.0f", i,
				g["go_goroutines"], g["process_open_fds"], g["process_resident_memory_bytes"]/(1<<20), g["lockproxy_client_connections"])
		}
	}
	r.o.Log.Print(line)
}

// drain waits up to drainTimeout for every instance to show no client
// connection, held lock or waiter, rests settleTime and takes the idle
// snapshot. drained is false when the gauges did not reach 0 in time.
func (r *run) drain(ctx context.Context) (idle []sampling.Sample, drained bool, err error) {
	deadline := time.Now().Add(drainTimeout)
	for {
		ss, err := r.smp.ReadAll(ctx)
		if err == nil && quiet(ss) {
			drained = true
			break
		}
		if time.Now().After(deadline) {
			r.o.Log.Printf("soak: instances not idle %s after the clients closed", drainTimeout)
			break
		}
		if err := workload.SleepCtx(ctx, 500*time.Millisecond); err != nil {
			return nil, false, err
		}
	}
	if err := workload.SleepCtx(ctx, settleTime); err != nil {
		return nil, false, err
	}
	idle, err = r.smp.ReadAll(ctx)
	if err != nil {
		return nil, false, err
	}
	return idle, drained && quiet(idle), nil
}

// quiet reports whether no instance has a client connection, a held lock
// or a waiter.
func quiet(ss []sampling.Sample) bool {
	for _, x := range ss {
		if x.Gauges["lockproxy_client_connections"] != 0 || x.Gauges["lockproxy_locks_held"] != 0 || x.Gauges["lockproxy_lock_waiters"] != 0 {
			return false
		}
	}
	return true
}

// startCPU starts measuring the primary mysqld's CPU; the function it
// returns gives the share of one core used since, in % (0 when unknown).
func startCPU(bed *env.Bed) func() float64 {
	pid, err := bed.PrimaryPID()
	if err != nil {
		return func() float64 { return 0 }
	}
	from, err := procstat.CPUTime(pid)
	at := time.Now()
	return func() float64 {
		to, err2 := procstat.CPUTime(pid)
		d := time.Since(at)
		if err != nil || err2 != nil || d <= 0 {
			return 0
		}
		return 100 * float64(to-from) / float64(d)
	}
}
