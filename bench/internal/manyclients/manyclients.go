package manyclients

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

const (
	database = "bench_manyclients"
	keyRange = 1000
	// poolMax is backends.pool.max_connections of the multiplexing
	// instance.
	poolMax = 200
	// dialers is how many connections are opened at once.
	dialers = 32
	// sampleEvery is how often MariaDB's Threads_connected is read.
	sampleEvery = 20 * time.Millisecond
)

// Scenario is the many-clients benchmark. The zero value is ready.
type Scenario struct{}

// New returns the manyclients scenario.
func New() *Scenario { return &Scenario{} }

// Name implements scenario.Scenario.
func (*Scenario) Name() string { return "manyclients" }

// Summary implements scenario.Scenario.
func (*Scenario) Summary() string {
	return "thousands of client connections through one lockproxy, 64 of them busy with autocommit point selects and short transactions, multiplexed over at most 200 primary connections vs one primary connection per client, interleaved: connections MariaDB sees, errors, throughput"
}

type plan struct {
	clients, busy, rounds, seconds int
}

func planFor(opts scenario.Options) plan {
	if opts.Quick {
		return plan{clients: 1000, busy: 64, rounds: 1, seconds: 5}
	}
	return plan{clients: 5000, busy: 64, rounds: 3, seconds: 10}
}

// Run implements scenario.Scenario: each round runs both modes, in an
// order that alternates from round to round, each on a fresh lockproxy.
func (s *Scenario) Run(ctx context.Context, e *env.Env, opts scenario.Options, r *results.Result) error {
	pl := planFor(opts)
	direct, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, ""))
	if err != nil {
		return fmt.Errorf("manyclients: %w", err)
	}
	defer direct.Close()
	restore, err := e.RoomOnPrimary(ctx, pl.clients+200)
	if err != nil {
		return err
	}
	defer restore()
	if err := prepare(ctx, direct); err != nil {
		return err
	}
	d := Data{Clients: pl.clients, Busy: pl.busy, Seconds: pl.seconds, PoolMax: poolMax, Rounds: pl.rounds, Dialers: dialers, KeyRange: keyRange}
	for round := 1; round <= pl.rounds; round++ {
		modes := []string{Multiplexed, Pinned}
		if round%2 == 0 {
			modes[0], modes[1] = modes[1], modes[0]
		}
		for _, mode := range modes {
			run, err := s.round(ctx, e, direct, pl, round, mode)
			if err != nil {
				return err
			}
			e.Log.Printf("manyclients: %s", run)
			d.Runs = append(d.Runs, run)
		}
	}
	d.summarize()
	r.Targets = d.targets()
	return r.SetData(d)
}

// prepare makes the table the clients read and write, directly.
func prepare(ctx context.Context, db *sql.DB) error {
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS " + database,
		"CREATE TABLE IF NOT EXISTS " + database + ".t (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"TRUNCATE " + database + ".t",
	}
	var rows []string
	for i := 1; i <= keyRange; i++ {
		rows = append(rows, fmt.Sprintf("(%d, 0)", i))
	}
	stmts = append(stmts, "INSERT INTO "+database+".t VALUES "+strings.Join(rows, ","))
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("manyclients: %s: %w", q[:min(len(q), 40)], err)
		}
	}
	return nil
}

// threads reads MariaDB's Threads_connected.
func threads(ctx context.Context, db *sql.DB) (int, error) {
	var name string
	var n int
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &n)
	return n, err
}

// errs counts the clients' errors and keeps the first.
type errs struct {
	mu    sync.Mutex
	n     int
	first string
}

func (e *errs) add(what string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == "" {
		e.first = fmt.Sprintf("%s: %v", what, err)
	}
}

func (s *Scenario) round(ctx context.Context, e *env.Env, direct *sql.DB, pl plan, round int, mode string) (Run, error) {
	cfg := env.ProxyConfig{MaxConnections: pl.clients + 100}
	if mode == Multiplexed {
		cfg.Multiplex, cfg.PoolConnections = true, poolMax
	}
	px, err := e.StartProxy(ctx, cfg)
	if err != nil {
		return Run{}, err
	}
	defer px.Stop(context.Background())
	run := Run{Round: round, Mode: mode, Clients: pl.clients}
	// lockproxy's own connections (its schema read, a multiplexing
	// instance's first pooled one) are in the baseline.
	if err := e.OneStatement(ctx, px.Addr); err != nil {
		return Run{}, fmt.Errorf("manyclients: warm-up: %w; lockproxy log:\n%s", err, px.Log())
	}
	time.Sleep(time.Second)
	if run.BackendBase, err = threads(ctx, direct); err != nil {
		return Run{}, fmt.Errorf("manyclients: %w", err)
	}
	peak := atomic.Int64{}
	peak.Store(int64(run.BackendBase))
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			if n, err := threads(sampleCtx, direct); err == nil && int64(n) > peak.Load() {
				peak.Store(int64(n))
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopSampling(); <-sampled }()

	dsn := strings.Replace(e.Bed.DSN(px.Addr, database), "interpolateParams=false", "interpolateParams=true", 1)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return Run{}, fmt.Errorf("manyclients: %w", err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // a closed Conn closes its connection
	var bad errs
	start := time.Now()
	conns := env.OpenConns(ctx, db, pl.clients, dialers, func(c *sql.Conn, i int) error {
		var v int64
		return c.QueryRowContext(ctx, "SELECT v FROM t WHERE id = ?", 1+i%keyRange).Scan(&v)
	}, func(i int, err error) { bad.add(fmt.Sprintf("connection %d", i), err) })
	run.ConnectSeconds = time.Since(start).Seconds()
	defer env.CloseConns(conns)

	var selects, txns atomic.Int64
	loopCtx, stop := context.WithTimeout(ctx, time.Duration(pl.seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	busy := 0
	begun := time.Now()
	for _, c := range conns {
		if c == nil || busy == pl.busy {
			continue
		}
		busy++
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(loopCtx, c, &selects, &txns, &bad)
		}()
	}
	wg.Wait()
	elapsed := time.Since(begun).Seconds()
	// Every client is still there: each runs one more statement.
	idle := make(chan *sql.Conn)
	var iwg sync.WaitGroup
	for range dialers {
		iwg.Add(1)
		go func() {
			defer iwg.Done()
			for c := range idle {
				if _, err := c.ExecContext(ctx, "SELECT 1"); err != nil {
					bad.add("a client's last statement", err)
				}
			}
		}()
	}
	for _, c := range conns {
		if c != nil {
			idle <- c
		}
	}
	close(idle)
	iwg.Wait()
	stopSampling()
	<-sampled
	run.Selects, run.Txns = int(selects.Load()), int(txns.Load())
	run.Ops = run.Selects + run.Txns
	run.OpsPerSec = float64(run.Ops) / elapsed
	run.Errors, run.FirstError = bad.n, bad.first
	run.BackendMax = int(peak.Load())
	run.BackendPeak = run.BackendMax - run.BackendBase
	return run, nil
}

// work loops, until ctx ends, over an autocommit point select and a
// short transaction (BEGIN; UPDATE of one row; COMMIT) on c.
func work(ctx context.Context, c *sql.Conn, selects, txns *atomic.Int64, bad *errs) {
	bg := context.Background() // a statement begun is finished
	for i := 0; ctx.Err() == nil; i++ {
		id := 1 + rand.IntN(keyRange)
		if i%2 == 0 {
			var v int64
			if err := c.QueryRowContext(bg, "SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
				bad.add("point select", err)
				continue
			}
			selects.Add(1)
			continue
		}
		if err := txn(bg, c, id); err != nil {
			bad.add("transaction", err)
			continue
		}
		txns.Add(1)
	}
}

func txn(ctx context.Context, c *sql.Conn, id int) error {
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE id = ?", id); err != nil {
		_, _ = c.ExecContext(ctx, "ROLLBACK")
		return err
	}
	_, err := c.ExecContext(ctx, "COMMIT")
	return err
}
