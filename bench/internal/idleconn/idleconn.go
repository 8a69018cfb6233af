package idleconn

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

// Targets (reported, not asserted).
const (
	// TargetPerConnKiB is the most lockproxy's RSS may grow per idle
	// authenticated client connection.
	TargetPerConnKiB = 16.0
	// TargetKeptShare is the most of the RSS the connections took that
	// lockproxy may still hold once they have all closed.
	TargetKeptShare = 0.25
)

// settle is how long the readings wait after the last connection opened
// or closed; afterClose are the instants RSS is read after the close.
var (
	settle     = 2 * time.Second
	afterClose = []time.Duration{2 * time.Second, 30 * time.Second}
)

// dialers is how many connections are opened at once.
const dialers = 32

// Scenario is the idle-connection benchmark. The zero value is ready.
type Scenario struct{}

// New returns the idleconn scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "idleconn" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "N authenticated idle client connections through one lockproxy: its RSS, heap and stacks per connection, and RSS after they close"
}

type plan struct {
	conns  int
	rounds int
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{conns: 1000, rounds: 1}
	}
	return plan{conns: 5000, rounds: 2}
}

// Run implements scenario.Scenario: each round starts a fresh lockproxy,
// opens the connections, reads, closes them and reads again.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	restore, err := e.RoomOnPrimary(ctx, pl.conns+100)
	if err != nil {
		return err
	}
	defer restore()
	d := Data{Conns: pl.conns, SettleSeconds: settle.Seconds()}
	for _, a := range afterClose {
		d.AfterCloseSeconds = append(d.AfterCloseSeconds, a.Seconds())
	}
	for round := 1; round <= pl.rounds; round++ {
		// Pinned and multiplexing instances alternate, the order reversed
		// every other round.
		modes := []bool{false, true}
		if round%2 == 0 {
			modes = []bool{true, false}
		}
		for _, mux := range modes {
			run, err := s.round(ctx, e, round, pl.conns, mux)
			if err != nil {
				return err
			}
			e.Log.Printf("idleconn: %s", run)
			d.Runs = append(d.Runs, run)
		}
	}
	d.summarize()
	r.Targets = d.targets()
	return r.SetData(d)
}

func (s *Scenario) round(ctx context.Context, e *env.Env, round, n int, mux bool) (Run, error) {
	px, err := e.StartProxy(ctx, env.ProxyConfig{MaxConnections: n + 100, Multiplex: mux})
	if err != nil {
		return Run{}, err
	}
	defer px.Stop(context.Background())
	run := Run{Round: round, Conns: n, Multiplex: mux}
	// One connection first, so what every session shares (backend pool,
	// schema, code paths run once) is in the baseline.
	if err := e.OneStatement(ctx, px.Addr); err != nil {
		return Run{}, fmt.Errorf("idleconn: warm-up: %w; lockproxy log:\n%s", err, px.Log())
	}
	time.Sleep(settle)
	if run.Base, err = read(px); err != nil {
		return Run{}, err
	}
	db, err := sql.Open("mysql", e.Bed.DSN(px.Addr, ""))
	if err != nil {
		return Run{}, fmt.Errorf("idleconn: %w", err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // a closed Conn closes its connection
	start := time.Now()
	var mu sync.Mutex
	var first error
	conns := env.OpenConns(ctx, db, n, dialers, func(c *sql.Conn, _ int) error {
		_, err := c.ExecContext(ctx, "SELECT 1")
		return err
	}, func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = fmt.Errorf("connection %d: %w", i, err)
		}
	})
	err = first
	run.ConnectSeconds = time.Since(start).Seconds()
	if err != nil {
		env.CloseConns(conns)
		return Run{}, fmt.Errorf("idleconn: %w; lockproxy log:\n%s", err, px.Log())
	}
	time.Sleep(settle)
	if run.Open, err = read(px); err != nil {
		env.CloseConns(conns)
		return Run{}, err
	}
	// The same connections after garbage collections, as a server that
	// has run for a while has had: they free what the logins left and
	// shrink goroutine stacks grown by them.
	if err := collect(px.AdminAddr); err != nil {
		env.CloseConns(conns)
		return Run{}, err
	}
	time.Sleep(settle)
	if run.Collected, err = read(px); err != nil {
		env.CloseConns(conns)
		return Run{}, err
	}
	env.CloseConns(conns)
	db.Close()
	closed := time.Now()
	for _, a := range afterClose {
		time.Sleep(time.Until(closed.Add(a)))
		m, err := read(px)
		if err != nil {
			return Run{}, err
		}
		run.Closed = append(run.Closed, m)
	}
	run.summarize()
	return run, nil
}

// read takes lockproxy's VmRSS and its Go runtime figures.
func read(px *env.Proxy) (Mem, error) {
	m, err := procstat.ReadMem(px.PID)
	if err != nil {
		return Mem{}, err
	}
	out := Mem{RSS: m.RSS}
	vals, err := scrape(px.AdminAddr, "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines")
	if err != nil {
		return Mem{}, err
	}
	out.HeapInuse, out.StackInuse, out.Goroutines = uint64(vals[0]), uint64(vals[1]), int(vals[2])
	return out, nil
}

// collect has lockproxy run two garbage collections (its heap profile
// endpoint runs one with gc=1): the stacks a collection shrinks are
// given back to the heap at the end of the next one.
func collect(admin string) error {
	client := http.Client{Timeout: 30 * time.Second}
	for range 2 {
		resp, err := client.Get("http://" + admin + "/debug/pprof/heap?gc=1")
		if err != nil {
			return fmt.Errorf("idleconn: asking for a collection: %w", err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("idleconn: asking for a collection: %w", err)
		}
	}
	return nil
}

// scrape reads the named unlabelled gauges from lockproxy's /metrics.
func scrape(admin string, names ...string) ([]float64, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("idleconn: scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	out := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if i, wanted := want[name]; ok && wanted {
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				return nil, fmt.Errorf("idleconn: %s: %w", name, err)
			}
			out[i] = v
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("idleconn: reading /metrics: %w", err)
	}
	if found != len(names) {
		return nil, fmt.Errorf("idleconn: /metrics lacks one of %v", names)
	}
	return out, nil
}
