package rewrite

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

// TargetRatio is the least rewrite-through-lockproxy / atomic-direct
// throughput (reported, not asserted).
const TargetRatio = 0.8

const (
	database = "bench_rewrite"
	clients  = 64
)

// Scenario is the rewrite benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the rewrite scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "rewrite" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "64 clients, one hot row: autocommit read-then-write through lockproxy with a rewrite-only rule (delta, no lock) vs the atomic UPDATE ... stock = stock - 1 directly; the statements lockproxy sends, directly and through a bare Go relay (the floor for any proxy)"
}

// Data is the stored result.
type Data struct {
	Clients int              `json:"clients"`
	Rounds  int              `json:"rounds"`
	Seconds float64          `json:"seconds"`
	Protos  []string         `json:"protocols"`
	Arms    []contend.Result `json:"arms"`
}

type plan struct {
	rounds  int
	seconds time.Duration
	protos  []bool // prepared?
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{rounds: 1, seconds: 3 * time.Second, protos: []bool{false}}
	}
	return plan{rounds: 3, seconds: 8 * time.Second, protos: []bool{false, true}}
}

// AtomicName is the baseline arm for a protocol.
func AtomicName(prepared bool) string { return "atomic UPDATE, direct, " + proto(prepared) }

// RewriteName is the arm through lockproxy for a protocol.
func RewriteName(prepared bool) string {
	return "read-then-write, rewrite rule, 1 instance, " + proto(prepared)
}

// UnsafeName is the unsafe code sent directly, for a protocol.
func UnsafeName(prepared bool) string { return "read-then-write, direct (unsafe), " + proto(prepared) }

// AtomicRelayName is the atomic UPDATE through the bare Go relay: the
// floor for one statement through any proxy.
func AtomicRelayName(prepared bool) string {
	return "atomic UPDATE via bare Go relay, " + proto(prepared)
}

// UnsafeRelayName is the unsafe code through the bare Go relay: its
// attempts/s is the floor for two statements through any proxy.
func UnsafeRelayName(prepared bool) string {
	return "read-then-write via bare Go relay (unsafe), " + proto(prepared)
}

// PairName is the two statements lockproxy sends for the read-then-write
// (the SELECT and the guarded relative UPDATE), sent directly.
func PairName(prepared bool) string {
	return "SELECT + guarded UPDATE (what lockproxy sends), direct, " + proto(prepared)
}

// PairRelayName is the same two statements through the bare Go relay: the
// floor for the rewrite through any proxy.
func PairRelayName(prepared bool) string {
	return "SELECT + guarded UPDATE (what lockproxy sends) via bare Go relay, " + proto(prepared)
}

func proto(prepared bool) string {
	if prepared {
		return "prepared"
	}
	return "text"
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	px, err := e.StartProxies(ctx, 1, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.RewriteRule(database)})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), px)
	relay, err := e.StartRelay(ctx, env.GoRelay, e.Bed.Primary)
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	defer relay.Stop(context.Background())
	t := contend.Timing{Env: e, Admin: admin, Database: database, Clients: clients, Keys: 1, Duration: pl.seconds}
	var arms []contend.Arm
	var protos []string
	for _, prepared := range pl.protos {
		protos = append(protos, proto(prepared))
		arms = append(arms,
			t.TimedArm(AtomicName(prepared), "", nil, func(p contend.Pools) contend.Op {
				return contend.Atomic(p, contend.HotKey, prepared)
			}),
			t.RelayArm(AtomicRelayName(prepared), AtomicName(prepared), relay, func(p contend.Pools) contend.Op {
				return contend.Atomic(p, contend.HotKey, prepared)
			}),
			t.TimedArm(RewriteName(prepared), AtomicName(prepared), px, func(p contend.Pools) contend.Op {
				return contend.AutocommitReadWrite(p, contend.HotKey, prepared, false)
			}),
			t.TimedArm(PairName(prepared), AtomicName(prepared), nil, func(p contend.Pools) contend.Op {
				return contend.RewrittenPair(p, contend.HotKey, prepared)
			}),
			t.RelayArm(PairRelayName(prepared), AtomicName(prepared), relay, func(p contend.Pools) contend.Op {
				return contend.RewrittenPair(p, contend.HotKey, prepared)
			}),
			t.TimedArm(UnsafeName(prepared), AtomicName(prepared), nil, func(p contend.Pools) contend.Op {
				return contend.AutocommitReadWrite(p, contend.HotKey, prepared, false)
			}),
			t.RelayArm(UnsafeRelayName(prepared), AtomicName(prepared), relay, func(p contend.Pools) contend.Op {
				return contend.AutocommitReadWrite(p, contend.HotKey, prepared, false)
			}),
		)
	}
	res, err := contend.Interleave(ctx, arms, pl.rounds, func(f string, a ...any) { e.Log.Printf("rewrite: "+f, a...) })
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	d := Data{Clients: clients, Rounds: pl.rounds, Seconds: pl.seconds.Seconds(), Protos: protos, Arms: res}
	r.Targets = targets(d)
	return r.SetData(d)
}
