package soak

import (
	"context"
	"database/sql"
	"log"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/soak/growth"
	"github.com/lockproxy/lockproxy/bench/internal/soak/invariant"
	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/soak/soakreport"
	"github.com/lockproxy/lockproxy/bench/internal/soak/workload"
)

// Options are what a run needs. Every field but Bed, Binary and Keep is
// required.
type Options struct {
	Root     string        // the repository root
	Command  string        // the command line, as the report names it
	Warmup   time.Duration // the workload before the start snapshots
	Duration time.Duration // the measured run
	Sample   time.Duration // interval between /metrics samples
	Bed      string        // reuse the bed running in this directory; "" starts a private one
	Binary   string        // a prebuilt lockproxy; "" builds ./cmd/lockproxy
	Keep     bool          // keep the scratch directory
	CSV      string        // where the series are written
	Log      *log.Logger
}

// run is one soak in progress: what Run set up and what the phases share.
type run struct {
	o       Options
	bed     *env.Bed
	primary *sql.DB // direct on the primary, for the checks
	proxies []*env.Proxy
	addrs   []string
	smp     *sampling.Sampler
	t       *workload.Tally
	watch   *workload.StockWatch
}

// readings are the snapshots and samples the phases leave behind.
type readings struct {
	loadStart, loadEnd []growth.Snapshot
	idleStart, idleEnd []sampling.Sample
	drained            bool
	loadSamples        []sampling.Sample // the measured run's
	primaryCPU         float64
}

// Run sets up, drives and measures the soak, writes the series to o.CSV
// and returns the report; an error means the run could not be completed,
// not that it failed its bounds (see Report.OK).
func Run(ctx context.Context, o Options) (*soakreport.Report, error) {
	e, cleanup, err := env.Setup(ctx, env.SetupOptions{Root: o.Root, Name: "soak", Binary: o.Binary,
		Bed: o.Bed, Keep: o.Keep, Log: o.Log})
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &soakreport.Report{
		Command: o.Command, Started: time.Now(), Warmup: o.Warmup, Duration: o.Duration, Sample: o.Sample,
		Machine: results.LocalMachine(ctx, o.Root),
	}
	if o.Binary != "" {
		rep.Machine.Binary = o.Binary
	}
	primary, err := workload.SetupSchema(ctx, e)
	if err != nil {
		return nil, err
	}
	defer primary.Close()
	if err := workload.WaitReplica(ctx, e.Bed); err != nil {
		return nil, err
	}
	o.Log.Printf("soak: starting 2 lockproxy instances (redis locks, replica routing)")
	cfg := env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: workload.RulesYAML(), WithReplica: true}
	proxies, err := e.StartProxies(ctx, 2, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := env.StopAll(context.Background(), proxies); err != nil {
			o.Log.Printf("soak: %v", err)
		}
	}()
	r := &run{o: o, bed: e.Bed, primary: primary, proxies: proxies}
	rd, err := r.measure(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.judge(ctx, rep, rd); err != nil {
		return nil, err
	}
	return rep, nil
}

// measure samples the instances from the warm-up to the idle end: warm-up,
// drain (idle start), measured run, drain (idle end).
func (r *run) measure(ctx context.Context) (readings, error) {
	var rd readings
	var targets []sampling.Target
	for _, p := range r.proxies {
		r.addrs = append(r.addrs, p.Addr)
		targets = append(targets, sampling.Target{Admin: p.AdminAddr, PID: p.PID})
	}
	r.smp = sampling.NewSampler(targets, time.Now())
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); r.smp.Run(sctx, r.o.Sample) }()
	r.watch = workload.NewStockWatch()
	go func() { defer bg.Done(); r.watch.Run(sctx, r.primary, r.o.Sample) }()

	r.t = workload.NewTally()
	// Warm-up: the same workload, then every client closed; its last
	// loaded samples are the loaded start, the drained state after it is
	// the idle start.
	r.o.Log.Printf("soak: warm-up %s", r.o.Warmup)
	var err error
	var drainedStart, drainedEnd bool
	if rd.loadStart, err = r.phase(ctx, sampling.PhaseWarmup, r.o.Warmup); err != nil {
		return rd, err
	}
	r.smp.SetPhase(sampling.PhaseIdleStart)
	if rd.idleStart, drainedStart, err = r.drain(ctx); err != nil {
		return rd, err
	}
	r.o.Log.Printf("soak: measured run %s", r.o.Duration)
	r.smp.SetPhase(sampling.PhaseLoad)
	busyFrom := len(r.smp.All())
	primaryCPU := startCPU(r.bed)
	if rd.loadEnd, err = r.phase(ctx, sampling.PhaseLoad, r.o.Duration); err != nil {
		return rd, err
	}
	rd.primaryCPU = primaryCPU()
	rd.loadSamples = r.smp.All()[busyFrom:]
	r.smp.SetPhase(sampling.PhaseIdleEnd)
	if rd.idleEnd, drainedEnd, err = r.drain(ctx); err != nil {
		return rd, err
	}
	stopSampling()
	bg.Wait()
	rd.drained = drainedStart && drainedEnd
	return rd, nil
}

// judge fills rep from the readings, the tally and the tables, and writes
// the series.
func (r *run) judge(ctx context.Context, rep *soakreport.Report, rd readings) error {
	rep.PrimaryCPU = rd.primaryCPU
	rep.Machine.LoadAvgEnd = results.LoadAvg()
	per := make([]growth.Snapshots, len(r.proxies))
	for i := range r.proxies {
		per[i] = growth.Snapshots{IdleStart: gaugesOf(rd.idleStart[i]), IdleEnd: gaugesOf(rd.idleEnd[i]), LoadStart: rd.loadStart[i], LoadEnd: rd.loadEnd[i]}
	}
	rep.Rows = growth.Compare(per)
	rep.Stmts, rep.Errs, rep.Msgs = r.t.Snapshot()
	rep.Counters = sampling.CounterDeltas(rd.idleStart, rd.idleEnd)
	rep.HostBusy, rep.ProxyCPU = sampling.MeanLoad(rd.loadSamples, len(r.proxies))

	st, err := workload.ReadState(ctx, r.primary)
	if err != nil {
		return err
	}
	alive := 0
	for _, p := range r.proxies {
		if !p.Exited() {
			alive++
		}
	}
	scrapeErrs, scrapeErr := r.smp.Failures()
	rep.Checks = invariant.Judge(invariant.Input{
		State: st, Tally: r.t, MinStock: r.watch.Lowest(), Drained: rd.drained,
		IdleEnd: rd.idleEnd, Counters: rep.Counters, Alive: alive, Instances: len(r.proxies),
		ScrapeErrs: scrapeErrs, ScrapeErr: scrapeErr, Unexpected: workload.Unexpected(rep.Errs),
	})
	if err := sampling.WriteCSV(r.o.CSV, r.smp.All()); err != nil {
		return err
	}
	rep.CSV = repoRelative(r.o.Root, r.o.CSV)
	if !rep.OK() {
		for i, p := range r.proxies {
			r.o.Log.Printf("soak: instance %d log tail:\n%s", i, p.Log())
		}
	}
	return nil
}

// gaugesOf is a sample's gauges as a snapshot.
func gaugesOf(s sampling.Sample) growth.Snapshot { return growth.Snapshot(s.Gauges) }

// repoRelative writes path relative to the repository root when it lies
// inside it, so the report names no directory of the machine it ran on.
func repoRelative(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return path
}
