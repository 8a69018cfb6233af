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
// UPDATE may send (round trips; reported, not asserted).
const TargetCalls = 2.0

// TargetPathTrips is the most Redis round trips the client of one
// uncontended guarded autocommit UPDATE may wait for; TargetExecuted the
// most commands Redis may run for it, scripts' own included (reported,
// not asserted).
const (
	TargetPathTrips = 1.0
	TargetExecuted  = 4.0
)

// pause separates the statements of the paced phase, so that what
// lockproxy sends after an answer (a release in the background) is not
// taken for part of the next statement.
const pause = 2 * time.Millisecond

// farDelay is how much further away the delayed phases put Redis; their
// statements pause farPause after each answer, long enough for a release
// sent after the answer to be done before the next statement.
const (
	farDelay = 5 * time.Millisecond
	farPause = 3 * farDelay
)

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
	// OnPath (paced phase only) are the commands of Sent that Redis ran
	// while a statement was between its sending and its answer: the
	// round trips the client waited for.
	OnPath        Counts             `json:"on_path,omitempty"`
	OnPathPerUnit map[string]float64 `json:"on_path_per_unit,omitempty"`
	PathTrips     float64            `json:"path_round_trips,omitempty"` // sum of OnPathPerUnit
	// SpanUs (paced phases only) is the mean time from sending a
	// statement to reading its answer, µs.
	SpanUs float64 `json:"span_us,omitempty"`
	// AddedUs (Far only) is what the relay's delay added to one round
	// trip as measured right after the phase (PINGs through the relay):
	// the unit its added time is counted in.
	AddedUs float64 `json:"added_us,omitempty"`
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
	// Paced: autocommit UPDATEs through lockproxy with a pause after each
	// answer, for the round trips on the client's path.
	Paced []Window `json:"paced,omitempty"`
	// Near and Far: paced autocommit UPDATEs through a second lockproxy
	// that reaches Redis through a relay adding nothing (Near) or
	// FarDelayMs to every request (Far); (Far − Near) / FarDelayMs of the
	// spans is the Redis round trips the client waited for.
	FarDelayMs float64  `json:"far_delay_ms,omitempty"`
	Near       []Window `json:"near,omitempty"`
	Far        []Window `json:"far,omitempty"`
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
	relay, err := startDelayRelay(e.Bed.Redis)
	if err != nil {
		return err
	}
	defer relay.Close()
	pxFar, err := e.StartProxy(ctx, env.ProxyConfig{Locks: contend.RedisLocks(relay.Addr()), Rules: contend.LockRule(database, "write, locking_read, read_in_txn")})
	if err != nil {
		return err
	}
	defer pxFar.Stop(context.Background())
	far, err := contend.Open(ctx, e, pxFar.Addr, database, 1)
	if err != nil {
		return err
	}
	defer far.Close()
	d := Data{N: pl.n, Rounds: pl.rounds, IdleSeconds: pl.idle.Seconds(), FarDelayMs: float64(farDelay) / float64(time.Millisecond)}
	ph := phases{via: via, direct: direct, far: far, relay: relay}
	// Warm up every way, then measure the idle instances' background.
	for _, db := range []*sql.DB{via, direct, far} {
		if err := updates(ctx, db, 50); err != nil {
			return err
		}
	}
	idle, err := m.window(ctx, func() error { time.Sleep(pl.idle); return nil }, nil)
	if err != nil {
		return err
	}
	d.Background, d.SentIdle = Rate(idle.Raw, idle.Seconds), Rate(idle.Sent, idle.Seconds)
	for round := 1; round <= pl.rounds; round++ {
		if err := s.round(ctx, m, &d, round, ph, e.Log.Printf); err != nil {
			return err
		}
	}
	r.Targets = targets(d)
	return r.SetData(d)
}

// phases are the connections a round measures through: lockproxy, MariaDB
// directly, and the lockproxy that reaches Redis through relay.
type phases struct {
	via, direct, far *sql.DB
	relay            *delayRelay
}

// round measures each phase once, alternating the order every round.
func (s *Scenario) round(ctx context.Context, m *meter, d *Data, round int, c phases, logf func(string, ...any)) error {
	var spans []Span // the paced phase's statements
	// farPaced runs the paced UPDATEs through c.far with Redis delay
	// further away.
	farPaced := func(delay time.Duration) func() error {
		return func() error {
			c.relay.set(delay)
			defer c.relay.set(0)
			return paced(ctx, c.far, d.N/8, farPause, &spans)
		}
	}
	phases := []struct {
		into *[]Window
		run  func() error
	}{
		{&d.Update, func() error { return updates(ctx, c.via, d.N) }},
		{&d.DirectUpdate, func() error { return updates(ctx, c.direct, d.N) }},
		{&d.Txn, func() error { return txns(ctx, c.via, d.N/4, false) }},
		{&d.DirectTxn, func() error { return txns(ctx, c.direct, d.N/4, true) }},
		{&d.Paced, func() error { return paced(ctx, c.via, d.N/4, pause, &spans) }},
		{&d.Near, farPaced(0)},
		{&d.Far, farPaced(farDelay)},
	}
	names := []string{"UPDATE via lockproxy", "UPDATE direct", "txn via lockproxy", "txn direct (FOR UPDATE)", "UPDATE via lockproxy, paced",
		"paced, Redis +0", fmt.Sprintf("paced, Redis +%s", farDelay)}
	units := []int{d.N, d.N, d.N / 4, d.N / 4, d.N / 4, d.N / 8, d.N / 8}
	for j := range phases {
		i := j
		if round%2 == 0 {
			i = len(phases) - 1 - j
		}
		spans = nil
		w, err := m.window(ctx, phases[i].run, &spans)
		if err != nil {
			return err
		}
		if len(spans) > 0 {
			var busy float64
			for _, sp := range spans {
				busy += sp.To - sp.From
			}
			w.OnPathPerUnit = PerUnit(w.OnPath, d.SentIdle, busy, units[i])
			w.PathTrips = Sum(w.OnPathPerUnit)
			w.SpanUs = busy * 1e6 / float64(len(spans))
		}
		if phases[i].into == &d.Far {
			added, err := c.relay.added(ctx, farDelay, 30)
			if err != nil {
				return err
			}
			w.AddedUs = float64(added) / float64(time.Microsecond)
		}
		w.Round, w.Units = round, units[i]
		w.PerUnit = PerUnit(w.Raw, d.Background, w.Seconds, w.Units)
		w.Calls = Sum(w.PerUnit)
		w.SentPerUnit = PerUnit(w.Sent, d.SentIdle, w.Seconds, w.Units)
		w.RoundTrips = Sum(w.SentPerUnit)
		w.LatencyUs = w.Seconds * 1e6 / float64(w.Units)
		*phases[i].into = append(*phases[i].into, w)
		logf("redisrtt: round %d %-24s %5d units %7.1f µs each (span %.1f µs); per unit: sent %.2f (%s), on the client's path %.2f; executed %.2f (%s)",
			round, names[i], w.Units, w.LatencyUs, w.SpanUs, w.RoundTrips, Format(w.SentPerUnit), w.PathTrips, w.Calls, Format(w.PerUnit))
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

// window measures work; with statement spans recorded in *spans by
// then, it also counts the commands sent inside them (Window.OnPath).
func (m *meter) window(ctx context.Context, work func() error, spans *[]Span) (Window, error) {
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
	w := Window{Seconds: took.Seconds(), Raw: Sub(after, before), Sent: CountSent(lines, self)}
	if spans != nil && len(*spans) > 0 {
		w.OnPath = CountOnPath(lines, self, *spans)
	}
	return w, nil
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

// paced sends n keyed autocommit UPDATEs like updates, recording each
// one's span and pausing for rest after each answer.
func paced(ctx context.Context, db *sql.DB, n int, rest time.Duration, spans *[]Span) error {
	unix := func() float64 { return float64(time.Now().UnixNano()) / 1e9 }
	for i := range n {
		q := fmt.Sprintf("UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d", i%keys+1)
		from := unix()
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("redisrtt: %s: %w", q, err)
		}
		*spans = append(*spans, Span{From: from, To: unix()})
		time.Sleep(rest)
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
