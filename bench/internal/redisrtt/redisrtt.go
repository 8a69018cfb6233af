package redisrtt

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/redis/go-redis/v9"
)

// TargetCalls is the most Redis commands one uncontended guarded autocommit
// UPDATE may cost (reported, not asserted).
const TargetCalls = 2.0

const (
	database = "bench_redisrtt"
	keys     = 100
)

// Scenario is the Redis round-trip benchmark. The zero value is ready to use.
type Scenario struct{}

// New returns the redisrtt scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "redisrtt" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "Redis commands per uncontended guarded statement through one lockproxy, from INFO commandstats (idle background subtracted); latency vs direct"
}

// Window is one measured phase of one round.
type Window struct {
	Round   int     `json:"round"`
	Units   int     `json:"units"`
	Seconds float64 `json:"seconds"`
	// Raw are the commands Redis executed in the window (INFO
	// commandstats: a script's own commands included), by command.
	Raw     Counts             `json:"raw"`
	PerUnit map[string]float64 `json:"per_unit"` // Raw, background subtracted, per statement or transaction
	Calls   float64            `json:"calls"`    // sum of PerUnit
	// Sent are the commands clients sent (MONITOR, a script's own commands
	// and bench's left out): the round trips, or an upper bound on them if
	// a client pipelines.
	Sent        Counts             `json:"sent"`
	SentPerUnit map[string]float64 `json:"sent_per_unit"`
	RoundTrips  float64            `json:"round_trips"` // sum of SentPerUnit
	// LatencyUs is the mean time of one unit, µs.
	LatencyUs float64 `json:"latency_us"`
}

// Data is the stored result.
type Data struct {
	N            int                `json:"n"`
	Rounds       int                `json:"rounds"`
	IdleSeconds  float64            `json:"idle_seconds"`
	Background   map[string]float64 `json:"background_per_s"`      // commands executed per second by an idle instance
	SentIdle     map[string]float64 `json:"sent_background_per_s"` // commands sent per second by an idle instance
	Update       []Window           `json:"update"`                // autocommit UPDATE through lockproxy
	Txn          []Window           `json:"txn"`                   // BEGIN; SELECT; UPDATE; COMMIT through lockproxy
	DirectUpdate []Window           `json:"direct_update"`         // the UPDATE directly (latency only)
	DirectTxn    []Window           `json:"direct_txn"`            // the transaction directly, FOR UPDATE (latency only)
}

type plan struct {
	n, rounds int
	idle      time.Duration
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{n: 300, rounds: 1, idle: 2 * time.Second}
	}
	return plan{n: 2000, rounds: 3, idle: 5 * time.Second}
}

// Run implements scenario.Scenario.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	admin, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := contend.Reset(ctx, admin, keys, contend.BigStock); err != nil {
		return err
	}
	px, err := e.StartProxy(ctx, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: contend.LockRule(database, "write, locking_read, read_in_txn")})
	if err != nil {
		return err
	}
	defer px.Stop(context.Background())
	rdb := contend.NewRedis(e.Bed.Redis, 1)
	defer rdb.Close()
	m := &meter{rdb: rdb, addr: e.Bed.Redis}
	via, err := contend.Open(ctx, e, px.Addr, database, 1)
	if err != nil {
		return err
	}
	defer via.Close()
	direct, err := contend.Open(ctx, e, e.Bed.Primary, database, 1)
	if err != nil {
		return err
	}
	defer direct.Close()
	d := Data{N: pl.n, Rounds: pl.rounds, IdleSeconds: pl.idle.Seconds()}
	// Warm up both ways, then measure the idle instance's background.
	for _, db := range []*sql.DB{via, direct} {
		if err := updates(ctx, db, 50); err != nil {
			return err
		}
	}
	idle, err := m.window(ctx, func() error { time.Sleep(pl.idle); return nil })
	if err != nil {
		return err
	}
	d.Background, d.SentIdle = Rate(idle.Raw, idle.Seconds), Rate(idle.Sent, idle.Seconds)
	for round := 1; round <= pl.rounds; round++ {
		if err := s.round(ctx, m, &d, round, via, direct, e.Log.Printf); err != nil {
			return err
		}
	}
	r.Targets = targets(d)
	return r.SetData(d)
}

// round measures each phase once, alternating the order every round.
func (s *Scenario) round(ctx context.Context, m *meter, d *Data, round int, via, direct *sql.DB, logf func(string, ...any)) error {
	phases := []struct {
		into *[]Window
		run  func() error
	}{
		{&d.Update, func() error { return updates(ctx, via, d.N) }},
		{&d.DirectUpdate, func() error { return updates(ctx, direct, d.N) }},
		{&d.Txn, func() error { return txns(ctx, via, d.N/4, false) }},
		{&d.DirectTxn, func() error { return txns(ctx, direct, d.N/4, true) }},
	}
	names := []string{"UPDATE via lockproxy", "UPDATE direct", "txn via lockproxy", "txn direct (FOR UPDATE)"}
	units := []int{d.N, d.N, d.N / 4, d.N / 4}
	for j := range phases {
		i := j
		if round%2 == 0 {
			i = len(phases) - 1 - j
		}
		w, err := m.window(ctx, phases[i].run)
		if err != nil {
			return err
		}
		w.Round, w.Units = round, units[i]
		w.PerUnit = PerUnit(w.Raw, d.Background, w.Seconds, w.Units)
		w.Calls = Sum(w.PerUnit)
		w.SentPerUnit = PerUnit(w.Sent, d.SentIdle, w.Seconds, w.Units)
		w.RoundTrips = Sum(w.SentPerUnit)
		w.LatencyUs = w.Seconds * 1e6 / float64(w.Units)
		*phases[i].into = append(*phases[i].into, w)
		logf("redisrtt: round %d %-24s %5d units %7.1f µs each; per unit: sent %.2f (%s); executed %.2f (%s)",
			round, names[i], w.Units, w.LatencyUs, w.RoundTrips, Format(w.SentPerUnit), w.Calls, Format(w.PerUnit))
	}
	return nil
}

// meter reads INFO commandstats and MONITOR around a piece of work.
type meter struct {
	rdb  *redis.Client
	addr string
	seq  int
}

func (m *meter) read(ctx context.Context) (Counts, error) {
	txt, err := m.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("redisrtt: INFO commandstats: %w", err)
	}
	return ParseCommandStats(txt)
}

func (m *meter) window(ctx context.Context, work func() error) (Window, error) {
	mon, err := startMonitor(ctx, m.addr)
	if err != nil {
		return Window{}, err
	}
	before, err := m.read(ctx)
	if err != nil {
		return Window{}, err
	}
	start := time.Now()
	if err := work(); err != nil {
		return Window{}, err
	}
	took := time.Since(start)
	after, err := m.read(ctx)
	if err != nil {
		return Window{}, err
	}
	m.seq++
	marker := fmt.Sprintf("bench-redisrtt-marker-%d-%d", time.Now().UnixNano(), m.seq)
	if err := m.rdb.Echo(ctx, marker).Err(); err != nil {
		return Window{}, fmt.Errorf("redisrtt: ECHO: %w", err)
	}
	lines, self, err := mon.until(marker, 30*time.Second)
	if err != nil {
		return Window{}, err
	}
	return Window{Seconds: took.Seconds(), Raw: Sub(after, before), Sent: CountSent(lines, self)}, nil
}

// updates sends n keyed autocommit UPDATEs one after the other on one
// connection, cycling over the keys.
func updates(ctx context.Context, db *sql.DB, n int) error {
	for i := range n {
		q := fmt.Sprintf("UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d", i%keys+1)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("redisrtt: %s: %w", q, err)
		}
	}
	return nil
}

// txns runs n read-then-write transactions one after the other.
func txns(ctx context.Context, db *sql.DB, n int, forUpdate bool) error {
	op := contend.TxnReadWrite(contend.Pools{db}, func(c int) int64 { return int64(c%keys + 1) }, contend.TxnStyle{ForUpdate: forUpdate})
	for i := range n {
		if _, err := op(ctx, i); err != nil {
			return fmt.Errorf("redisrtt: transaction: %w", err)
		}
	}
	return nil
}
