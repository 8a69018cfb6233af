package streaming

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

// TargetGrowthMB is the most lockproxy's RSS may grow while streaming the
// table (reported, not asserted).
const TargetGrowthMB = 32.0

// sampleEvery is how often lockproxy's VmRSS is read during a query.
const sampleEvery = 10 * time.Millisecond

// Scenario is the streaming benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the streaming scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "streaming" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "a 1,000,000-row SELECT read to the end directly and through lockproxy (fast and slow reader); proxy RSS growth and time"
}

type plan struct {
	rows       int
	fastRounds int
	slowRounds int
	slow       reader
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{rows: 1_000_000, fastRounds: 2, slowRounds: 1, slow: reader{SleepEvery: 2000, Sleep: 10 * time.Millisecond}}
	}
	return plan{rows: 1_000_000, fastRounds: 3, slowRounds: 2, slow: reader{SleepEvery: 1000, Sleep: 10 * time.Millisecond}}
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	if err := ensureTable(ctx, e, pl.rows); err != nil {
		return err
	}
	d := Data{Rows: pl.rows, SleepEvery: pl.slow.SleepEvery, SleepMs: float64(pl.slow.Sleep) / 1e6, SampleMs: float64(sampleEvery) / 1e6}
	// Warm the buffer pool so the first timed run does not pay for disk.
	if _, err := s.direct(ctx, e, 0, reader{}); err != nil {
		return err
	}
	for round := 1; round <= pl.fastRounds; round++ {
		for _, run := range []func() (Run, error){
			func() (Run, error) { return s.direct(ctx, e, round, reader{}) },
			func() (Run, error) { return s.proxied(ctx, e, round, Fast, reader{}) },
		} {
			m, err := run()
			if err != nil {
				return err
			}
			e.Log.Printf("streaming: %s", m)
			d.Runs = append(d.Runs, m)
		}
	}
	for round := 1; round <= pl.slowRounds; round++ {
		m, err := s.proxied(ctx, e, round, Slow, pl.slow)
		if err != nil {
			return err
		}
		e.Log.Printf("streaming: %s", m)
		d.Runs = append(d.Runs, m)
	}
	d.summarize()
	r.Targets = d.targets()
	return r.SetData(d)
}

// direct reads the table straight from the primary.
func (s *Scenario) direct(ctx context.Context, e *env.Env, round int, rd reader) (Run, error) {
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, database))
	if err != nil {
		return Run{}, fmt.Errorf("streaming: %w", err)
	}
	defer db.Close()
	n, b, took, err := readAll(ctx, db, rd)
	if err != nil {
		return Run{}, fmt.Errorf("streaming: direct: %w", err)
	}
	return Run{Path: Direct, Reader: Fast, Round: round, Rows: n, Bytes: b, Seconds: took.Seconds()}, nil
}

// proxied reads the table through a fresh lockproxy, so that every run
// starts from the same baseline, sampling the proxy's memory meanwhile.
func (s *Scenario) proxied(ctx context.Context, e *env.Env, round int, kind string, rd reader) (Run, error) {
	px, err := e.StartProxy(ctx, env.ProxyConfig{})
	if err != nil {
		return Run{}, err
	}
	defer px.Stop(context.Background())
	db, err := sql.Open("mysql", e.Bed.DSN(px.Addr, database))
	if err != nil {
		return Run{}, fmt.Errorf("streaming: %w", err)
	}
	defer db.Close()
	// One round trip first: the session and backend connection exist before
	// the baseline is taken, so the growth is the query's alone.
	if err := db.PingContext(ctx); err != nil {
		return Run{}, fmt.Errorf("streaming: ping through lockproxy: %w", err)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		return Run{}, fmt.Errorf("streaming: warm-up through lockproxy: %w", err)
	}
	time.Sleep(200 * time.Millisecond)
	base, err := procstat.ReadMem(px.PID)
	if err != nil {
		return Run{}, err
	}
	sampler := procstat.StartSampler(px.PID, sampleEvery)
	n, b, took, rerr := readAll(ctx, db, rd)
	samples, peak, serr := sampler.Stop()
	end, merr := procstat.ReadMem(px.PID)
	if rerr != nil {
		return Run{}, fmt.Errorf("streaming: through lockproxy: %w; lockproxy log:\n%s", rerr, px.Log())
	}
	if serr != nil || merr != nil {
		return Run{}, fmt.Errorf("streaming: sampling lockproxy memory: %v %v", serr, merr)
	}
	m := Run{Path: Proxy, Reader: kind, Round: round, Rows: n, Bytes: b, Seconds: took.Seconds(),
		BaselineRSS: base.RSS, PeakRSS: peak, BaselineHWM: base.HWM, EndHWM: end.HWM, Samples: downsample(samples, 400)}
	m.Growth = growth(m)
	return m, nil
}

// growth is the larger of the sampled peak over the baseline and the kernel's
// high-water mark over its value at baseline (which catches a peak between
// two samples).
func growth(m Run) uint64 {
	var g uint64
	if m.PeakRSS > m.BaselineRSS {
		g = m.PeakRSS - m.BaselineRSS
	}
	if m.EndHWM > m.BaselineHWM && m.EndHWM > m.BaselineRSS {
		g = max(g, m.EndHWM-max(m.BaselineHWM, m.BaselineRSS))
	}
	return g
}

// downsample keeps at most n samples, evenly spaced, always keeping the
// highest one so the chart shows the peak.
func downsample(ss []procstat.Sample, n int) []Point {
	step := 1
	if len(ss) > n {
		step = (len(ss) + n - 1) / n
	}
	peak := 0
	for i, s := range ss {
		if s.RSS > ss[peak].RSS {
			peak = i
		}
	}
	var out []Point
	for i, s := range ss {
		if i%step == 0 || i == peak || i == len(ss)-1 {
			out = append(out, Point{At: s.At.Seconds(), RSSMB: float64(s.RSS) / (1 << 20)})
		}
	}
	return out
}
