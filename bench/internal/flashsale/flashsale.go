package flashsale

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

const (
	database    = "bench_flashsale"
	stock       = 100
	maxAttempts = 200
)

// Baselines (direct on MariaDB) by name.
const (
	ForUpdateText     = "FOR UPDATE txn, text"
	ForUpdatePrepared = "FOR UPDATE txn, prepared"
	UnsafeText        = "unsafe txn, text"
	UnsafePrepared    = "unsafe txn, prepared"
	AppLock           = "app Redis lock + unsafe txn, text"
)

// Scenario is the flash-sale benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the flashsale scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "flashsale" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "M buyers, stock 100, one sku: unsafe read-then-write through N lockproxy instances (lock rule; rewrite rule) vs FOR UPDATE, an app-side Redis lock and the unsafe code directly; oversold, lost updates, orders/s, latency"
}

// Data is the stored result.
type Data struct {
	Buyers    int              `json:"buyers"`
	Stock     int              `json:"stock"`
	Rounds    int              `json:"rounds"`
	Instances []int            `json:"instances"`
	Arms      []contend.Result `json:"arms"`
}

type plan struct {
	buyers    int
	rounds    int
	instances []int
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{buyers: 100, rounds: 1, instances: []int{1, 2}}
	}
	return plan{buyers: 400, rounds: 3, instances: []int{1, 2, 4}}
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
	locks := contend.RedisLocks(e.Bed.Redis)
	lockPx, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: locks, Rules: contend.LockRule(database, "write, locking_read, read_in_txn")})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), lockPx)
	rwPx, err := e.StartProxies(ctx, nmax, env.ProxyConfig{Locks: locks, Rules: contend.RewriteRule(database)})
	if err != nil {
		return err
	}
	defer env.StopAll(context.Background(), rwPx)
	rdb := contend.NewRedis(e.Bed.Redis, pl.buyers)
	defer rdb.Close()

	k := &kit{e: e, admin: admin, buyers: pl.buyers}
	arms := k.arms(pl, lockPx, rwPx, rdb)
	res, err := contend.Interleave(ctx, arms, pl.rounds, func(f string, a ...any) { e.Log.Printf("flashsale: "+f, a...) })
	if err != nil {
		return fmt.Errorf("flashsale: %w", err)
	}
	d := Data{Buyers: pl.buyers, Stock: stock, Rounds: pl.rounds, Instances: pl.instances, Arms: res}
	r.Targets = targets(d)
	return r.SetData(d)
}

// kit runs one sale for an arm.
type kit struct {
	e      *env.Env
	admin  *sql.DB
	buyers int
}

// sale resets the stock, opens warmed handles on addrs, lets every buyer
// buy once and checks the tables.
func (k *kit) sale(ctx context.Context, addrs []string, mk func(contend.Pools) contend.Op) (contend.Sample, error) {
	if err := contend.Reset(ctx, k.admin, 1, stock); err != nil {
		return contend.Sample{}, err
	}
	pools, closeAll, err := contend.Handles(ctx, k.e, addrs, database, k.buyers)
	if err != nil {
		return contend.Sample{}, err
	}
	defer closeAll()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	run := contend.Sale(sctx, k.buyers, maxAttempts, mk(pools))
	st, err := contend.ReadState(ctx, k.admin)
	if err != nil {
		return contend.Sample{}, err
	}
	return contend.Sample{
		Run: run, Oversold: contend.Oversold(stock, st.Orders), Lost: contend.Lost(stock, st.Stock, st.Orders),
	}, nil
}
