package gobench

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

// Targets, in ns per operation (reported, not asserted).
const (
	TargetAnalyzeNs  = 20_000 // BenchmarkAnalyzeKeyedUpdate, uncached
	TargetCacheHitNs = 1_000  // BenchmarkCacheHit
)

// Groups of benchmarks.
const (
	GroupParser = "parser"
	GroupRules  = "rules"
	GroupProxy  = "proxy"
	GroupLock   = "lock"
)

// Spec is one package and the benchmarks wanted from it.
type Spec struct {
	Group   string
	Pkg     string // relative to the checkout, as go test takes it
	Benches []string
}

// Backend names the lock backend a lockmgr package implements, for tables
// and charts: "./lockmgr/redislock/" → "redislock".
func (s Spec) Backend() string { return backendOf(s.Pkg) }

// LockBenches are the two figures compared across backends.
var LockBenches = []string{"BenchmarkUncontended", "BenchmarkHotKeyHandoff"}

// Specs lists what the scenario runs, in report order.
func Specs() []Spec {
	ss := []Spec{
		{GroupParser, "./parser/", []string{"BenchmarkAnalyzeKeyedUpdate", "BenchmarkCacheHit", "BenchmarkShapeHit", "BenchmarkShapeHitString", "BenchmarkShapeHitRange", "BenchmarkAnalyzeRange", "BenchmarkShapeHitInsert", "BenchmarkAnalyzeInsert", "BenchmarkAsCurrentRead", "BenchmarkAnalyzeStringKeyedUpdate", "BenchmarkAnalyzeORMSelect", "BenchmarkAnalyzeINList500", "BenchmarkRewriteUpdate"}},
		{GroupRules, "./rules/", []string{"BenchmarkMatch", "BenchmarkEncodeKey", "BenchmarkTextKeyASCII", "BenchmarkTextKeyServerCached", "BenchmarkTextKeyServerFirst",
			"BenchmarkNumberKeyString", "BenchmarkNumberKeyServerCached", "BenchmarkNumberKeyServerFirst"}},
		{GroupProxy, "./proxy/", []string{"BenchmarkSplitText", "BenchmarkGuardedUpdate"}},
	}
	for _, b := range []string{"memlock", "redislock", "redlock", "mysqllock", "etcdlock", "zklock"} {
		ss = append(ss, Spec{GroupLock, "./lockmgr/" + b + "/", LockBenches})
	}
	return ss
}

// Scenario is the Go micro-benchmark scenario. The zero value is ready to
// use; it is not safe for concurrent Run calls.
type Scenario struct{}

// New returns the gobench scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "gobench" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "lockproxy's Go micro-benchmarks (parser, rule matching, every lock backend) run by go test against the bed; medians over interleaved rounds"
}

// plan is how long each benchmark runs and how often.
type plan struct {
	benchtime string
	rounds    int
	attempts  int           // per invocation, when the package does not build
	retryWait time.Duration // between attempts
	timeout   time.Duration // per invocation
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{benchtime: "200ms", rounds: 1, attempts: 3, retryWait: time.Minute, timeout: 5 * time.Minute}
	}
	return plan{benchtime: "1s", rounds: 3, attempts: 3, retryWait: time.Minute, timeout: 8 * time.Minute}
}

// Run implements scenario.Scenario: for each round it runs every package
// once (-count 1), the package order reversed every other round, so a
// burst of load on the shared machine falls on different packages.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	specs := Specs()
	d := Data{Benchtime: pl.benchtime, Rounds: pl.rounds, Testbed: e.Bed.Dir}
	for round := 1; round <= pl.rounds; round++ {
		for j := range specs {
			i := j
			if round%2 == 0 {
				i = len(specs) - 1 - j
			}
			inv, err := invoke(ctx, e.Root, e.Bed.Dir, specs[i], pl, e.Log.Printf)
			if err != nil {
				return err
			}
			inv.Round = round
			d.Invocations = append(d.Invocations, inv)
			e.Log.Printf("gobench: round %d %-22s %5.1fs ok=%v lines=%d ended=%d load %s", round, specs[i].Pkg, inv.Seconds, inv.OK, len(inv.Lines), len(inv.Ended), inv.LoadAvg)
		}
	}
	d.Benches = Aggregate(specs, d.Invocations)
	r.Targets = targets(d)
	if err := r.SetData(d); err != nil {
		return err
	}
	if n := missing(d.Benches); n == len(d.Benches) {
		return fmt.Errorf("gobench: no benchmark produced a figure")
	}
	return nil
}

func missing(bs []Bench) int {
	n := 0
	for _, b := range bs {
		if b.Missing != "" {
			n++
		}
	}
	return n
}
