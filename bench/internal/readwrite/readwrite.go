package readwrite

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/redisrtt"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
	"github.com/redis/go-redis/v9"
)

const (
	database  = "bench_readwrite"
	tableSize = 10000
	threads   = 8
)

// The arms.
const (
	Direct  = "direct"
	NoRules = "lockproxy, no rules"
	Locked  = "lockproxy, lock rule"
	// Memory is the lock rule on the in-memory lock backend: a lock
	// service with no round trip, the floor of any behind the relay.
	Memory = "lockproxy, lock rule, in-memory lock"
)

// Target is the least throughput through the instance with the lock rule,
// as a share of direct, for text and prepared statements alike (reported,
// not asserted); Moonshot is the figure to aim for beyond it.
const (
	Target   = 0.5
	Moonshot = 0.7
)

// rule guards the one table oltp_read_write writes (--tables=1): every
// statement on it keyed by id locks its row, plain reads in a transaction
// too; its range reads (BETWEEN) cannot be keyed and run without row
// locks (on_unkeyed_read's default, allow).
const rule = "  - name: sbtest1\n    table: " + database + ".sbtest1\n    key: [id]\n    lock: [write, locking_read, read_in_txn]\n    on_unkeyed: reject\n"

// Scenario is the read-write benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the readwrite scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "readwrite" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "sysbench oltp_read_write on one table, direct vs one lockproxy with no rules vs one with a lock rule on sbtest1 (write, locking_read, read_in_txn; Redis) vs the same rule on the in-memory lock, text and prepared, interleaved; throughput ratio, CPU and Redis commands per query"
}

// Run is one sysbench run of one arm.
type Run struct {
	Round  int            `json:"round"`
	Arm    string         `json:"arm"`
	PSMode string         `json:"ps_mode"`
	Stats  sysbench.Stats `json:"stats"`
	// CPU seconds the arm's lockproxy (0 directly), mysqld and Redis used
	// during the run; RedisCalls the commands Redis executed (INFO
	// commandstats, a script's own included; bench's own INFO left out).
	ProxyCPUSec  float64 `json:"proxy_cpu_s"`
	MysqldCPUSec float64 `json:"mysqld_cpu_s"`
	RedisCPUSec  float64 `json:"redis_cpu_s"`
	RedisCalls   int64   `json:"redis_calls"`
	HostBusy     float64 `json:"host_busy"`
}

// Data is the stored result.
type Data struct {
	Threads   int   `json:"threads"`
	Seconds   int   `json:"seconds"`
	Rounds    int   `json:"rounds"`
	TableSize int   `json:"table_size"`
	Runs      []Run `json:"runs"`
}

type plan struct{ rounds, seconds int }

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{rounds: 1, seconds: 4}
	}
	return plan{rounds: 3, seconds: 10}
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	if err := prepare(ctx, e); err != nil {
		return err
	}
	plain, err := e.StartProxy(ctx, env.ProxyConfig{})
	if err != nil {
		return err
	}
	defer plain.Stop(context.Background())
	locked, err := e.StartProxy(ctx, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: rule})
	if err != nil {
		return err
	}
	defer locked.Stop(context.Background())
	mem, err := e.StartProxy(ctx, env.ProxyConfig{Rules: rule})
	if err != nil {
		return err
	}
	defer mem.Stop(context.Background())
	rdb := contend.NewRedis(e.Bed.Redis, 1)
	defer rdb.Close()
	m := meter{e: e, rdb: rdb, redis: contend.RedisPID(e.Bed), proxies: map[string]*env.Proxy{NoRules: plain, Locked: locked, Memory: mem}}
	m.mysqld, _ = e.Bed.PrimaryPID()
	d := Data{Threads: threads, Seconds: pl.seconds, Rounds: pl.rounds, TableSize: tableSize}
	arms := []string{Direct, NoRules, Locked, Memory}
	for round := 1; round <= pl.rounds; round++ {
		for _, ps := range []string{"disable", "auto"} {
			for j := range arms {
				arm := arms[j]
				if round%2 == 0 {
					arm = arms[len(arms)-1-j]
				}
				run, err := m.run(ctx, arm, ps, pl.seconds)
				if err != nil {
					return err
				}
				run.Round = round
				d.Runs = append(d.Runs, run)
				e.Log.Printf("readwrite: round %d %-22s ps=%-7s %7.1f tps %8.1f qps, %d errors; per query: lockproxy %.1f µs, mysqld %.1f µs, Redis %.1f µs CPU, %.2f Redis commands",
					round, arm, ps, run.Stats.TPS, run.Stats.QPS, run.Stats.Errors, perQuery(run, run.ProxyCPUSec)*1e6, perQuery(run, run.MysqldCPUSec)*1e6,
					perQuery(run, run.RedisCPUSec)*1e6, perQuery(run, float64(run.RedisCalls)))
			}
		}
	}
	r.Targets = targets(d)
	return r.SetData(d)
}

// prepare creates the database and sysbench's one table on the primary,
// directly.
func prepare(ctx context.Context, e *env.Env) error {
	if err := e.CreateDatabase(ctx, database); err != nil {
		return fmt.Errorf("readwrite: %w", err)
	}
	w, err := workload(e, e.Bed.Primary, "disable", 1)
	if err != nil {
		return err
	}
	e.Log.Printf("readwrite: sysbench prepare --tables=1 --table-size=%d on the primary", tableSize)
	return sysbench.Prepare(ctx, w)
}

func workload(e *env.Env, addr, ps string, seconds int) (sysbench.Workload, error) {
	host, port, err := env.HostPort(addr)
	if err != nil {
		return sysbench.Workload{}, err
	}
	return sysbench.Workload{
		Test: "oltp_read_write", Host: host, Port: port, User: e.Bed.User, Password: e.Bed.Password, DB: database,
		Tables: 1, TableSize: tableSize, Threads: threads, Seconds: seconds, PSMode: ps,
	}, nil
}

// meter runs one arm and reads the processes' CPU and Redis's command
// counts around it.
type meter struct {
	e             *env.Env
	rdb           *redis.Client
	mysqld, redis int
	proxies       map[string]*env.Proxy
}

func (m meter) run(ctx context.Context, arm, ps string, seconds int) (Run, error) {
	addr, pid := m.e.Bed.Primary, 0
	if px := m.proxies[arm]; px != nil {
		addr, pid = px.Addr, px.PID
	}
	w, err := workload(m.e, addr, ps, seconds)
	if err != nil {
		return Run{}, err
	}
	calls0, err := m.calls(ctx)
	if err != nil {
		return Run{}, err
	}
	proxy0, mysqld0, redis0 := cpu(pid), cpu(m.mysqld), cpu(m.redis)
	host0, _ := procstat.ReadHostCPU()
	st, err := sysbench.Run(ctx, w)
	if err != nil {
		return Run{}, fmt.Errorf("readwrite: %s, ps=%s: %w", arm, ps, err)
	}
	host1, _ := procstat.ReadHostCPU()
	run := Run{Arm: arm, PSMode: ps, Stats: st,
		ProxyCPUSec: (cpu(pid) - proxy0).Seconds(), MysqldCPUSec: (cpu(m.mysqld) - mysqld0).Seconds(), RedisCPUSec: (cpu(m.redis) - redis0).Seconds(),
		HostBusy: procstat.BusyShare(host0, host1)}
	calls1, err := m.calls(ctx)
	if err != nil {
		return Run{}, err
	}
	run.RedisCalls = calls1 - calls0
	return run, nil
}

// calls is the number of commands Redis has executed, bench's INFO left
// out.
func (m meter) calls(ctx context.Context) (int64, error) {
	txt, err := m.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("readwrite: INFO commandstats: %w", err)
	}
	c, err := redisrtt.ParseCommandStats(txt)
	if err != nil {
		return 0, err
	}
	var n int64
	for name, v := range c {
		if name != "info" {
			n += v
		}
	}
	return n, nil
}

func cpu(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, _ := procstat.CPUTime(pid)
	return d
}

// perQuery is v divided by the run's queries.
func perQuery(r Run, v float64) float64 {
	if r.Stats.Queries == 0 {
		return 0
	}
	return v / float64(r.Stats.Queries)
}
