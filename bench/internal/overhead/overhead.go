package overhead

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver for the prepare step
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
)

// Targets the scenario is shown against (reported, not asserted).
const (
	TargetRatio8   = 0.50 // proxy/direct throughput at 8 threads, at least
	TargetAddedUs1 = 60.0 // µs added per query at 1 thread, at most
	TargetCPUUs    = 20.0 // lockproxy CPU per point select at 8 threads, µs, at most
	// TargetReplicaVsPrimary: the replica route's ratio to direct-at-the-
	// replica, over the primary route's ratio, at 8 threads, at least.
	TargetReplicaVsPrimary = 0.90
	// MinReplicaShare: of a replica-routed run's statements, at least this
	// share must have gone to the replica for its figures to count.
	MinReplicaShare = 0.99
)

const (
	tables    = 4
	tableSize = 10000
	database  = "sbtest"
)

// Scenario is the overhead benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the overhead scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "overhead" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "sysbench direct vs through one lockproxy (no rules) vs the same with backends.pool.multiplex on vs through two relays that parse nothing (bare Go relay, socat), interleaved; qps ratio and added latency, lockproxy against the bare Go relay, multiplexing on against off; point selects also on the replica route (direct at the replica vs through a lockproxy that routes them there)"
}

// plan is what one mode runs.
type plan struct {
	tests   []string
	threads []int
	psModes []string
	rounds  int
	seconds int
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{[]string{"oltp_point_select"}, []int{1, 8}, []string{"disable", "auto"}, 3, 2}
	}
	return plan{[]string{"oltp_point_select", "oltp_read_write"}, []int{1, 8, 32}, []string{"disable", "auto"}, 5, 4}
}

func (p plan) configs() []Config {
	var out []Config
	for _, t := range p.tests {
		for _, ps := range p.psModes {
			for _, th := range p.threads {
				out = append(out, Config{Test: t, Threads: th, PSMode: ps})
			}
		}
	}
	return out
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	if err := prepare(ctx, e); err != nil {
		return err
	}
	m, err := newMeasurer(ctx, e, env.ProxyConfig{}, e.Log.Printf)
	if err != nil {
		return err
	}
	defer m.stop()
	cells, err := m.interleave(ctx, pl, e.Log.Printf)
	if err != nil {
		return err
	}
	d := Data{Rounds: pl.rounds, Seconds: pl.seconds, Tables: tables, TableSize: tableSize, Cells: cells}
	r.Targets = targets(cells)
	return r.SetData(d)
}

// prepare creates the sbtest database on the primary and fills it with
// sysbench's tables, directly (not through the proxy).
func prepare(ctx context.Context, e *env.Env) error {
	if err := e.CreateDatabase(ctx, database); err != nil {
		return fmt.Errorf("overhead: %w", err)
	}
	w, err := workload(e, e.Bed.Primary, Config{Test: "oltp_point_select", Threads: 1, PSMode: "disable"}, 1)
	if err != nil {
		return err
	}
	e.Log.Printf("overhead: sysbench prepare --tables=%d --table-size=%d on the primary", tables, tableSize)
	if err := sysbench.Prepare(ctx, w); err != nil {
		return err
	}
	return waitReplica(ctx, e)
}

// waitReplica waits until the replica holds every row sysbench prepared on
// the primary, so replica runs read the same tables. A bed without a
// replica has nothing to wait for (its replica runs are recorded failed).
func waitReplica(ctx context.Context, e *env.Env) error {
	if e.Bed.Replica == "" {
		return nil
	}
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Replica, ""))
	if err != nil {
		return fmt.Errorf("overhead: %w", err)
	}
	defer db.Close()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s.sbtest%d", database, tables)
	for {
		var n int
		err := db.QueryRowContext(wctx, q).Scan(&n)
		if err == nil && n == tableSize {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("overhead: the replica did not catch up with sysbench prepare (%s: %d rows, %v)", q, n, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func workload(e *env.Env, addr string, c Config, seconds int) (sysbench.Workload, error) {
	host, port, err := env.HostPort(addr)
	if err != nil {
		return sysbench.Workload{}, err
	}
	return sysbench.Workload{
		Test: c.Test, Host: host, Port: port, User: e.Bed.User, Password: e.Bed.Password, DB: database,
		Tables: tables, TableSize: tableSize, Threads: c.Threads, Seconds: seconds, PSMode: c.PSMode,
	}, nil
}
