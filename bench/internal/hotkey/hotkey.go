package hotkey

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/redis/go-redis/v9"
)

// Targets the scenario is shown against (reported, not asserted).
const (
	TargetVsForUpdate = 0.60 // lockproxy (lock rule) / FOR UPDATE direct throughput, at least
	TargetOptimistic  = 1.0  // lockproxy (optimistic rule) / FOR UPDATE direct throughput, at least
	TargetJain        = 0.95 // Jain's index over the clients through lockproxy (lock rule), at least
	TargetVsAppLock   = 3.0  // lockproxy / app-side lock throughput, at least
	TargetTail        = 4.0  // lockproxy p99 / p50, at most
	// TargetCombined: the conditional UPDATE through 2 instances with
	// rules[].combine / the same statement directly, at least (also its
	// p99 no worse than direct's, and Jain at least TargetJain).
	TargetCombined = 3.0
)

const (
	database = "bench_hotkey"
	clients  = 64
)

// Arm names of the main comparison.
const (
	ForUpdate = "FOR UPDATE txn, direct"
	// ForUpdateRelay is the same FOR UPDATE transaction through the bare
	// Go relay: InnoDB still does the locking, but every statement inside
	// the serialized critical section crosses one more loopback hop. It is
	// the floor for any proxy on this host.
	ForUpdateRelay = "FOR UPDATE txn via bare Go relay"
	Proxy          = "unsafe txn, lock rule, 2 instances"
	// ProxyRelay is the unsafe transaction through the bare Go relay
	// holding one in-memory lock from the SELECT until COMMIT is answered,
	// where lockproxy's lock rule holds the row lock: the floor for any
	// proxy that locks outside the database (one process, so its lock is
	// handed over without a network hop).
	ProxyRelay = "unsafe txn, in-memory lock at the SELECT, via bare Go relay"
	AppLock    = "app Redis lock + unsafe txn, direct"
	// Optimistic is the same unsafe transaction through a rule with
	// rewrite and lock: [] (no row lock, no Redis round trip): the
	// guarded UPDATE is the guarantee and InnoDB serialises the row.
	Optimistic = "unsafe txn, optimistic rule, 2 instances"
	// OptimisticRelay is the transaction as the optimistic rule sends it
	// (the plain SELECT, the guarded relative UPDATE, COMMIT) through the
	// bare Go relay: the floor for the optimistic rule through any proxy.
	OptimisticRelay = "txn as the optimistic rule sends it, via bare Go relay"

	// CondDirect is the seeds' safe pattern, the anchor of the combining
	// comparison: the autocommit conditional UPDATE (SET stock = stock - 1
	// WHERE sku_id = 1 AND stock > 0) sent directly, one InnoDB commit
	// per statement.
	CondDirect = "conditional UPDATE, direct"
	// CombinedLock and CombinedOptimistic send the same statement through
	// 2 instances whose rule has combine: {} (lock: [write], and lock: []).
	CombinedLock       = "conditional UPDATE, combine + lock rule, 2 instances"
	CombinedOptimistic = "conditional UPDATE, combine + optimistic rule, 2 instances"
	// CombineForUpdate is the FOR UPDATE transaction directly, beside them.
	CombineForUpdate = ForUpdate
)

// Scenario is the hot-key benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the hotkey scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "hotkey" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "64 clients loop read-then-write on one row: through 2 lockproxy instances (lock rule; optimistic rewrite rule) vs FOR UPDATE direct (and through a bare Go relay, the floor for any proxy) vs an app-side Redis lock; throughput, wait p50/p99/max, handoff fairness by waiters and instances"
}

// Data is the stored result.
type Data struct {
	Clients     int              `json:"clients"`
	Rounds      int              `json:"rounds"`
	Seconds     float64          `json:"seconds"`
	Main        []contend.Result `json:"main"`
	FairSeconds float64          `json:"fair_seconds"`
	Waiters     []int            `json:"waiters"`
	Fairness    []contend.Result `json:"fairness"`
	// Combine compares the conditional UPDATE directly with it through 2
	// instances with hot-row combining, and FOR UPDATE directly.
	Combine   []contend.Result `json:"combine,omitempty"`
	VsAppLock float64          `json:"vs_app_lock"` // lockproxy / app lock throughput, median of paired rounds
}

type plan struct {
	rounds     int
	seconds    time.Duration
	waiters    []int
	fairWindow time.Duration
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{rounds: 1, seconds: 3 * time.Second, waiters: []int{8, 64}, fairWindow: 2 * time.Second}
	}
	return plan{rounds: 3, seconds: 10 * time.Second, waiters: []int{8, 32, 64}, fairWindow: 6 * time.Second}
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	px, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.LockRule(database, "write, locking_read, read_in_txn")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), px)
	opx, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.OptimisticRule(database)})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), opx)
	cpx, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: combineRule(database, "[write]")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), cpx)
	copx, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: combineRule(database, "[]")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), copx)
	relay, err := e.StartRelay(ctx, env.GoRelay, e.Bed.Primary)
	if err != nil {
		return fmt.Errorf("hotkey: %w", err)
	}
	defer relay.Stop(context.Background())
	locking, err := e.StartRelay(ctx, env.LockingGoRelay, e.Bed.Primary)
	if err != nil {
		return fmt.Errorf("hotkey: %w", err)
	}
	defer locking.Stop(context.Background())
	rdb := contend.NewRedis(e.Bed.Redis, clients)
	defer rdb.Close()
	logf := func(f string, a ...any) { e.Log.Printf("hotkey: "+f, a...) }

	t := contend.Timing{Env: e, Admin: admin, Database: database, Clients: clients, Keys: 1, Duration: pl.seconds}
	main, err := contend.Interleave(ctx, mainArms(t, px, opx, relay, locking, rdb), pl.rounds, logf)
	if err != nil {
		return fmt.Errorf("hotkey: %w", err)
	}
	fair, err := contend.Interleave(ctx, fairArms(t, px, pl), 1, logf)
	if err != nil {
		return fmt.Errorf("hotkey: %w", err)
	}
	combine, err := contend.Interleave(ctx, combineArms(t, cpx, copx), pl.rounds, logf)
	if err != nil {
		return fmt.Errorf("hotkey: %w", err)
	}
	d := Data{Clients: clients, Rounds: pl.rounds, Seconds: pl.seconds.Seconds(), Main: main,
		FairSeconds: pl.fairWindow.Seconds(), Waiters: pl.waiters, Fairness: fair, Combine: combine}
	p, _ := contend.Find(main, Proxy)
	a, _ := contend.Find(main, AppLock)
	d.VsAppLock = contend.PairedRatio(p, a, contend.Run.DonePerSec)
	r.Targets = targets(d)
	return r.SetData(d)
}

func txn(forUpdate bool) func(contend.Pools) contend.Op {
	return func(p contend.Pools) contend.Op {
		return contend.TxnReadWrite(p, contend.HotKey, contend.TxnStyle{ForUpdate: forUpdate})
	}
}

func mainArms(t contend.Timing, px, opx []*env.Proxy, relay, locking *env.Relay, rdb *redis.Client) []contend.Arm {
	run := 0
	return []contend.Arm{
		t.TimedArm(ForUpdate, "", nil, txn(true)),
		t.RelayArm(ForUpdateRelay, ForUpdate, relay, txn(true)),
		t.TimedArm(Proxy, ForUpdate, px[:2], txn(false)),
		t.RelayArm(ProxyRelay, ForUpdate, locking, txn(false)),
		t.TimedArm(Optimistic, ForUpdate, opx[:2], txn(false)),
		t.RelayArm(OptimisticRelay, ForUpdate, relay, func(p contend.Pools) contend.Op {
			return contend.TxnReadWrite(p, contend.HotKey, contend.TxnStyle{Guarded: true})
		}),
		t.TimedArm(AppLock, ForUpdate, nil, func(p contend.Pools) contend.Op {
			run++
			prefix := "bench:hotkey:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" + strconv.Itoa(run) + ":"
			return contend.AppLocked(rdb, prefix, contend.HotKey, contend.TxnReadWrite(p, contend.HotKey, contend.TxnStyle{}))
		}),
	}
}

// FairName is the arm name of the fairness matrix for w waiters and n
// instances (0: FOR UPDATE direct).
func FairName(w, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d waiters, FOR UPDATE direct", w)
	}
	return fmt.Sprintf("%d waiters, lockproxy ×%d", w, n)
}

func fairArms(t contend.Timing, px []*env.Proxy, pl plan) []contend.Arm {
	var out []contend.Arm
	t.Duration = pl.fairWindow
	for _, w := range pl.waiters {
		t.Clients = w
		out = append(out, t.TimedArm(FairName(w, 0), "", nil, txn(true)))
		for _, n := range []int{1, 2} {
			out = append(out, t.TimedArm(FairName(w, n), FairName(w, 0), px[:n], txn(false)))
		}
	}
	return out
}

// combineRule is the stock rule with rewrite (delta, min 0) and combine,
// locking as lock says ("[write]" or "[]").
func combineRule(db, lock string) string {
	return fmt.Sprintf("  - name: sku-stock\n    table: %s.%s\n    key: [sku_id]\n    lock: %s\n    rewrite:\n      column: stock\n      mode: delta\n      min: 0\n    combine: {}\n",
		db, contend.TableName, lock)
}

// combineArms are the conditional UPDATE directly (the anchor), through 2
// instances that combine (lock rule, optimistic rule), and the FOR UPDATE
// transaction directly.
func combineArms(t contend.Timing, cpx, copx []*env.Proxy) []contend.Arm {
	cond := func(p contend.Pools) contend.Op { return contend.Atomic(p, contend.HotKey, false) }
	return []contend.Arm{
		t.TimedArm(CondDirect, "", nil, cond),
		t.TimedArm(CombinedLock, CondDirect, cpx[:2], cond),
		t.TimedArm(CombinedOptimistic, CondDirect, copx[:2], cond),
		t.TimedArm(CombineForUpdate, CondDirect, nil, txn(true)),
	}
}
