package bank

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

const database = "bench_bank"

// Arm names. The FOR UPDATE arms are the baselines of the arms of their
// protocol.
const (
	ForUpdateText     = "FOR UPDATE, direct, text"
	ForUpdatePrepared = "FOR UPDATE, direct, prepared"
	UnsafeText        = "plain SELECTs, direct, text (unsafe)"
)

// ProxyName is the arm of the plain-SELECT code through n instances.
func ProxyName(n int, prepared bool) string {
	if prepared {
		return fmt.Sprintf("plain SELECTs, %d lockproxy, prepared", n)
	}
	return fmt.Sprintf("plain SELECTs, %d lockproxy, text", n)
}

// Scenario is the bank benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the bank scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "bank" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "transfers between two random accounts of 8 (two plain SELECTs, two absolute UPDATEs per transaction) through 1 and 2 lockproxy instances vs the same code with FOR UPDATE directly; transfers/s, retries, p99, drift of the total"
}

// Data is the stored result.
type Data struct {
	Clients  int              `json:"clients"`
	Accounts int              `json:"accounts"`
	Rounds   int              `json:"rounds"`
	Seconds  float64          `json:"seconds"`
	Arms     []contend.Result `json:"arms"`
}

type plan struct {
	clients, accounts, rounds int
	seconds                   time.Duration
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{clients: 8, accounts: 8, rounds: 1, seconds: 3 * time.Second}
	}
	return plan{clients: 32, accounts: 8, rounds: 3, seconds: 6 * time.Second}
}

// Rule is the rule the instances run: every read and write of an account
// in a transaction takes its row lock.
func Rule() string { return contend.LockRule(database, "write, locking_read, read_in_txn") }

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	px, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: Rule()})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), px)
	t := contend.Timing{Env: e, Admin: admin, Database: database, Clients: pl.clients, Keys: pl.accounts,
		Duration: pl.seconds, Conserved: true}
	op := func(st contend.TransferStyle) func(contend.Pools) contend.Op {
		return func(p contend.Pools) contend.Op { return contend.Transfer(p, pl.accounts, st) }
	}
	text, prepared := contend.TransferStyle{}, contend.TransferStyle{Prepared: true}
	arms := []contend.Arm{
		t.TimedArm(ForUpdateText, "", nil, op(contend.TransferStyle{ForUpdate: true})),
		t.TimedArm(UnsafeText, ForUpdateText, nil, op(text)),
		t.TimedArm(ProxyName(1, false), ForUpdateText, px[:1], op(text)),
		t.TimedArm(ProxyName(2, false), ForUpdateText, px, op(text)),
		t.TimedArm(ForUpdatePrepared, "", nil, op(contend.TransferStyle{ForUpdate: true, Prepared: true})),
		t.TimedArm(ProxyName(2, true), ForUpdatePrepared, px, op(prepared)),
	}
	res, err := contend.Interleave(ctx, arms, pl.rounds, func(f string, a ...any) { e.Log.Printf("bank: "+f, a...) })
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	d := Data{Clients: pl.clients, Accounts: pl.accounts, Rounds: pl.rounds, Seconds: pl.seconds.Seconds(), Arms: res}
	r.Targets = targets(d)
	return r.SetData(d)
}
