package disjoint

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

const database = "bench_disjoint"

// DirectName is the baseline arm.
const DirectName = "guarded UPDATE, direct"

// ProxyName is the arm through n instances.
func ProxyName(n int) string { return fmt.Sprintf("guarded UPDATE, lock rule, %d instance(s)", n) }

// Linger is the locks.redis.linger of the linger arms.
const Linger = "2ms"

// LingerName is the arm through n instances with locks.redis.linger.
func LingerName(n int) string {
	return fmt.Sprintf("guarded UPDATE, lock rule, linger %s, %d instance(s)", Linger, n)
}

// The floors, each through one instance: NoRuleName with no rule on the
// table (the relay's own cost), MemoryName with the lock rule on the
// in-memory lock backend (a lock service that costs no round trip and no
// other process: what any lock service behind this relay can reach).
const (
	NoRuleName = "UPDATE, no rule, 1 instance(s)"
	MemoryName = "guarded UPDATE, lock rule, in-memory lock, 1 instance(s)"
)

// Target is the ratio to direct asked of one instance.
const Target = 0.75

// Scenario is the disjoint-keys benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the disjoint scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "disjoint" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "each client updates its own row through 1, 2, 4 lockproxy instances (lock rule on write, Redis) vs directly, with the floors of one instance with no rule and with the rule on the in-memory lock; throughput and CPU per statement"
}

// Data is the stored result.
type Data struct {
	Clients   int     `json:"clients"`
	Rounds    int     `json:"rounds"`
	Seconds   float64 `json:"seconds"`
	Instances []int   `json:"instances"`
	// LingerInstances are the instance counts of the linger arms (none
	// in runs before they existed).
	LingerInstances []int            `json:"linger_instances,omitempty"`
	NProc           int              `json:"nproc"`
	Arms            []contend.Result `json:"arms"`
}

type plan struct {
	clients   int
	rounds    int
	seconds   time.Duration
	instances []int
	linger    []int
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{clients: 8, rounds: 1, seconds: 3 * time.Second, instances: []int{1, 2}, linger: []int{1}}
	}
	return plan{clients: 16, rounds: 3, seconds: 6 * time.Second, instances: []int{1, 2, 4}, linger: []int{1, 2}}
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	nmax := pl.instances[len(pl.instances)-1]
	px, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), px)
	relay, err := e.StartProxies(ctx, 1, env.ProxyConfig{})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), relay)
	mem, err := e.StartProxies(ctx, 1, env.ProxyConfig{Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), mem)
	lmax := pl.linger[len(pl.linger)-1]
	lx, err := e.StartProxies(ctx, lmax, env.ProxyConfig{Locks: contend.LingerLocks(e.Bed.Redis, Linger), Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), lx)
	t := contend.Timing{Env: e, Admin: admin, Database: database, Clients: pl.clients, Keys: pl.clients, Duration: pl.seconds}
	op := func(p contend.Pools) contend.Op { return contend.Decrement(p, contend.OwnKey, false) }
	arms := []contend.Arm{t.TimedArm(DirectName, "", nil, op)}
	for _, n := range pl.instances {
		arms = append(arms, t.TimedArm(ProxyName(n), DirectName, px[:n], op))
	}
	for _, n := range pl.linger {
		arms = append(arms, t.TimedArm(LingerName(n), DirectName, lx[:n], op))
	}
	arms = append(arms, t.TimedArm(NoRuleName, DirectName, relay, op), t.TimedArm(MemoryName, DirectName, mem, op))
	res, err := contend.Interleave(ctx, arms, pl.rounds, func(f string, a ...any) { e.Log.Printf("disjoint: "+f, a...) })
	if err != nil {
		return fmt.Errorf("disjoint: %w", err)
	}
	d := Data{Clients: pl.clients, Rounds: pl.rounds, Seconds: pl.seconds.Seconds(), Instances: pl.instances, LingerInstances: pl.linger,
		NProc: r.Machine.NProc, Arms: res}
	r.Targets = targets(d)
	return r.SetData(d)
}
