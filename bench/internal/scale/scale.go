package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

const database = "bench_scale"

// DirectName is the baseline arm of clients clients.
func DirectName(clients int) string { return fmt.Sprintf("%d clients, direct", clients) }

// ProxyName is the arm of clients clients through n instances.
func ProxyName(clients, n int) string {
	return fmt.Sprintf("%d clients, %d instance(s)", clients, n)
}

// Linger is the locks.redis.linger of the linger arms.
const Linger = "2ms"

// LingerName is the arm of clients through n instances with
// locks.redis.linger.
func LingerName(clients, n int) string {
	return fmt.Sprintf("%d clients, %d instance(s), linger %s", clients, n, Linger)
}

// ReleaseWindow is the locks.redis.release_window of the release-window
// arms: off, where the plain arms run lockproxy's default (1ms).
const ReleaseWindow = "0s"

// ReleaseWindowName is the arm of clients through n instances with
// locks.redis.release_window.
func ReleaseWindowName(clients, n int) string {
	return fmt.Sprintf("%d clients, %d instance(s), release window %s", clients, n, ReleaseWindow)
}

// SharedName is the arm of clients through n instances that share the
// host's cores out: each runs with GOMAXPROCS = cores / n (at least 1),
// as a CPU limit of cores / n per instance would set it. With one
// instance that is the default, so the series starts from ProxyName's
// arm (sharedStep).
func SharedName(clients, n int) string {
	return fmt.Sprintf("%d clients, %d instance(s), cores shared out", clients, n)
}

// sharedStep is the arm of the shared-cores series at n instances.
func sharedStep(clients, n int) string {
	if n == 1 {
		return ProxyName(clients, 1)
	}
	return SharedName(clients, n)
}

// Scenario is the uniform-keys scale benchmark. The zero value is ready
// to use.
type Scenario struct{}

// New returns the scale scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "scale" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "guarded single-row UPDATE on uniform keys over 100k rows, 8 / 64 / 256 clients through 1, 2, 4 lockproxy instances (lock rule on write, Redis; also with the host's cores shared out among the instances) vs directly"
}

// Data is the stored result.
type Data struct {
	Keys      int              `json:"keys"`
	Clients   []int            `json:"clients"`
	Instances []int            `json:"instances"`
	Rounds    int              `json:"rounds"`
	Seconds   float64          `json:"seconds"`
	NProc     int              `json:"nproc"`
	Arms      []contend.Result `json:"arms"`
	// Lingering: the run has the linger arms (runs before them do not).
	Lingering bool `json:"lingering,omitempty"`
	// Windowed: the run has the release-window arms.
	Windowed bool `json:"windowed,omitempty"`
	// Shared: the run has the shared-cores arms.
	Shared bool `json:"shared,omitempty"`
}

type plan struct {
	keys      int
	clients   []int
	instances []int
	rounds    int
	seconds   time.Duration
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{keys: 10_000, clients: []int{8, 64}, instances: []int{1, 2}, rounds: 1, seconds: 3 * time.Second}
	}
	return plan{keys: 100_000, clients: []int{8, 64, 256}, instances: []int{1, 2, 4}, rounds: 3, seconds: 5 * time.Second}
}

// uniformKey draws a sku uniformly from 1..keys for every statement.
func uniformKey(keys int) contend.Key {
	return func(int) int64 { return rand.Int64N(int64(keys)) + 1 }
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	// Every arm's connections may still be open on the primary (a
	// pool's idle ones) when the next arm opens as many: room for the
	// direct clients and each set of instances (four of the plain
	// configuration and two that share the cores out).
	restore, err := e.RoomOnPrimary(ctx, 6*pl.clients[len(pl.clients)-1]+200)
	if err != nil {
		return err
	}
	defer restore()
	nmax := pl.instances[len(pl.instances)-1]
	px, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), px)
	lx, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: contend.LingerLocks(e.Bed.Redis, Linger), Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), lx)
	rx, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: contend.ReleaseWindowLocks(e.Bed.Redis, ReleaseWindow), Rules: contend.LockRule(database, "write")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), rx)
	// The shared-cores instances, by how many share the host: n of them
	// with GOMAXPROCS = cores / n each.
	shared := map[int][]*env.Proxy{}
	for _, n := range pl.instances {
		if n == 1 {
			continue
		}
		sx, err := e.StartProxies(ctx, n, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.LockRule(database, "write"),
			GOMAXPROCS: max(1, r.Machine.NProc/n)})
		if err != nil {
			return err
		}
		defer env.StopAll(context.Background(), sx)
		shared[n] = sx
	}
	op := func(p contend.Pools) contend.Op { return contend.Decrement(p, uniformKey(pl.keys), false) }
	var arms []contend.Arm
	for _, c := range pl.clients {
		t := contend.Timing{Env: e, Admin: admin, Database: database, Clients: c, Keys: pl.keys, Duration: pl.seconds}
		arms = append(arms, t.TimedArm(DirectName(c), "", nil, op))
		for _, n := range pl.instances {
			arms = append(arms, t.TimedArm(ProxyName(c, n), DirectName(c), px[:n], op))
		}
		for _, n := range pl.instances {
			arms = append(arms, t.TimedArm(LingerName(c, n), DirectName(c), lx[:n], op))
		}
		for _, n := range pl.instances {
			arms = append(arms, t.TimedArm(ReleaseWindowName(c, n), DirectName(c), rx[:n], op))
		}
		for _, n := range pl.instances {
			if sx := shared[n]; sx != nil {
				arms = append(arms, t.TimedArm(SharedName(c, n), DirectName(c), sx, op))
			}
		}
	}
	res, err := contend.Interleave(ctx, arms, pl.rounds, func(f string, a ...any) { e.Log.Printf("scale: "+f, a...) })
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	d := Data{Keys: pl.keys, Clients: pl.clients, Instances: pl.instances, Rounds: pl.rounds, Seconds: pl.seconds.Seconds(),
		NProc: r.Machine.NProc, Arms: res, Lingering: true, Windowed: true, Shared: true}
	r.Targets = targets(d)
	return r.SetData(d)
}
