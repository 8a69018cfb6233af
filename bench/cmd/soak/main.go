// Command soak runs a long mixed workload through two lockproxy instances
// and fails when their goroutines, open file descriptors or memory grow
// beyond stated bounds, or when the data shows an oversold item, a lost
// update or a lock left behind.
//
//	go run ./bench/cmd/soak                  30 minutes after a 2-minute warm-up (make soak)
//	go run ./bench/cmd/soak -duration 5m     a short try
//
// It builds lockproxy from the checkout (or takes -lockproxy), starts a
// private test bed (or reuses -bed DIR), writes the series as CSV and the
// report into the "## Latest run" section of bench/SOAK.md, and exits 1 when
// a bound or an invariant fails. It never imports lockproxy's packages.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Drain: after the clients close, how long the instances get to show no
// client connection, held lock or waiter, and how long they then rest
// before the idle snapshot.
const (
	drainTimeout = 15 * time.Second
	settleTime   = 3 * time.Second
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	duration time.Duration
	warmup   time.Duration
	sample   time.Duration
	bed      string
	binary   string
	out      string
	csv      string
	keep     bool
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&f.duration, "duration", 30*time.Minute, "length of the measured run")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Minute, "workload before the start snapshot")
	fs.DurationVar(&f.sample, "sample", 10*time.Second, "interval between /metrics samples")
	fs.StringVar(&f.bed, "bed", "", "reuse the test bed running in this directory (default: start a private one and stop it after)")
	fs.StringVar(&f.binary, "lockproxy", "", "use this lockproxy binary instead of building ./cmd/lockproxy")
	fs.StringVar(&f.out, "out", "", `report file whose "## Latest run" section is rewritten (default: <repo>/bench/SOAK.md)`)
	fs.StringVar(&f.csv, "csv", "", "series file (default: <repo>/bench/results/soak.csv with the default -out, else -out with .csv)")
	fs.BoolVar(&f.keep, "keep", false, "keep the scratch directory (each instance's rules.yaml and log)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("soak: unexpected arguments %q", fs.Args())
	}
	if f.duration <= 0 || f.warmup <= 0 || f.sample <= 0 {
		return f, errors.New("soak: -duration, -warmup and -sample must be positive")
	}
	return f, nil
}

// repoRelative writes path relative to the repository root when it lies
// inside it, so the report names no directory of the machine it ran on.
func repoRelative(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return path
}

// outputs resolves the report and CSV paths.
func outputs(root string, f flags) (out, csv string) {
	out, csv = f.out, f.csv
	if out == "" {
		out = filepath.Join(root, "bench", "SOAK.md")
		if csv == "" {
			csv = filepath.Join(root, "bench", "results", "soak.csv")
		}
	}
	if csv == "" {
		csv = strings.TrimSuffix(out, filepath.Ext(out)) + ".csv"
	}
	return out, csv
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	logger := log.New(stderr, "", log.Ltime)
	_ = mysql.SetLogger(driverLog{logger})
	root, err := env.RepoRoot()
	if err != nil {
		logger.Printf("%s: %v", "soak", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s := &soak{f: f, root: root, log: logger, args: args}
	rep, err := s.run(ctx)
	if err != nil {
		logger.Printf("soak: %v", err)
		return 1
	}
	section := rep.markdown()
	fmt.Fprintln(stdout, section)
	out, _ := outputs(root, f)
	if err := writeLatest(out, section); err != nil {
		logger.Printf("soak: %v", err)
		return 1
	}
	logger.Printf("soak: %s; report in %s, series in %s", rep.verdict(), out, rep.CSV)
	if !rep.ok() {
		return 1
	}
	return 0
}

// driverLog passes the MySQL driver's log on, without the lines every
// deliberately dropped connection causes.
type driverLog struct{ l *log.Logger }

// Print implements mysql.Logger.
func (d driverLog) Print(v ...any) {
	msg := fmt.Sprint(v...)
	if strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "connection reset by peer") {
		return
	}
	d.l.Print("soak: mysql driver: " + msg)
}

// soak is one run.
type soak struct {
	f    flags
	root string
	log  *log.Logger
	args []string
}

// run sets up, drives and measures the soak and returns its report.
func (s *soak) run(ctx context.Context) (*report, error) {
	e, cleanup, err := s.setup(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &report{
		Command: strings.TrimSpace("go run ./bench/cmd/soak " + strings.Join(s.args, " ")),
		Started: time.Now(), Warmup: s.f.warmup, Duration: s.f.duration, Sample: s.f.sample,
		Machine: results.LocalMachine(ctx, s.root),
	}
	if s.f.binary != "" {
		rep.Machine.Binary = s.f.binary
	}
	primary, err := setupSchema(ctx, e)
	if err != nil {
		return nil, err
	}
	defer primary.Close()
	if err := waitReplica(ctx, e.Bed); err != nil {
		return nil, err
	}
	s.log.Printf("soak: starting 2 lockproxy instances (redis locks, replica routing)")
	cfg := env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis), Rules: rulesYAML(), WithReplica: true}
	proxies, err := e.StartProxies(ctx, 2, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := env.StopAll(context.Background(), proxies); err != nil {
			s.log.Printf("soak: %v", err)
		}
	}()
	var addrs []string
	var targets []target
	for _, p := range proxies {
		addrs = append(addrs, p.Addr)
		targets = append(targets, target{admin: p.AdminAddr, pid: p.PID})
	}

	smp := newSampler(targets, time.Now())
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); smp.run(sctx, s.f.sample) }()
	watch := &stockWatch{min: initialStock}
	go func() { defer bg.Done(); watch.run(sctx, primary, s.f.sample) }()

	t := newTally()
	// Warm-up: the same workload, then every client closed; its last
	// loaded samples are the loaded start, the drained state after it is
	// the idle start.
	s.log.Printf("soak: warm-up %s", s.f.warmup)
	loadStart, err := s.phase(ctx, e.Bed, addrs, t, smp, phaseWarmup, s.f.warmup)
	if err != nil {
		return nil, err
	}
	smp.setPhase(phaseIdleStart)
	idleStart, drainedStart, err := s.drain(ctx, smp)
	if err != nil {
		return nil, err
	}
	s.log.Printf("soak: measured run %s", s.f.duration)
	smp.setPhase(phaseLoad)
	busyFrom := len(smp.all())
	primaryCPU := startCPU(e.Bed)
	loadEnd, err := s.phase(ctx, e.Bed, addrs, t, smp, phaseLoad, s.f.duration)
	if err != nil {
		return nil, err
	}
	rep.PrimaryCPU = primaryCPU()
	loadSamples := smp.all()[busyFrom:]
	smp.setPhase(phaseIdleEnd)
	idleEnd, drainedEnd, err := s.drain(ctx, smp)
	if err != nil {
		return nil, err
	}
	stopSampling()
	bg.Wait()
	rep.Machine.LoadAvgEnd = results.LoadAvg()

	per := make([]snapshots, len(proxies))
	for i := range proxies {
		per[i] = snapshots{IdleStart: gaugesOf(idleStart[i]), IdleEnd: gaugesOf(idleEnd[i]), LoadStart: loadStart[i], LoadEnd: loadEnd[i]}
	}
	rep.Rows = compare(per)
	rep.Stmts, rep.Errs, rep.Msgs = t.snapshot()
	rep.Counters = counterDeltas(idleStart, idleEnd)
	rep.HostBusy, rep.ProxyCPU = meanLoad(loadSamples, len(proxies))

	st, err := readState(ctx, primary)
	if err != nil {
		return nil, err
	}
	alive := 0
	for _, p := range proxies {
		if !p.Exited() {
			alive++
		}
	}
	rep.Checks = invariants(invariantInput{
		state: st, tally: t, minStock: watch.lowest(), drained: drainedStart && drainedEnd,
		idleEnd: idleEnd, counters: rep.Counters, alive: alive, instances: len(proxies),
		scrapeErrs: smp.errs, scrapeErr: smp.lastErr, unexpected: unexpected(rep.Errs),
	})
	_, csvPath := outputs(s.root, s.f)
	if err := writeCSV(csvPath, smp.all()); err != nil {
		return nil, err
	}
	rep.CSV = repoRelative(s.root, csvPath)
	if !rep.ok() {
		for i, p := range proxies {
			s.log.Printf("soak: instance %d log tail:\n%s", i, p.Log())
		}
	}
	return rep, nil
}

// setup builds (or takes) the binary and starts (or reuses) the bed; see
// env.Setup.
func (s *soak) setup(ctx context.Context) (*env.Env, func(), error) {
	return env.Setup(ctx, env.SetupOptions{Root: s.root, Name: "soak", Binary: s.f.binary,
		Bed: s.f.bed, Keep: s.f.keep, Log: s.log})
}

// phase runs the workload for d, takes one more sample and returns each
// instance's loaded snapshot (the median of its last samples of the phase)
// after stopping the workload and closing its pools.
func (s *soak) phase(ctx context.Context, bed *env.Bed, addrs []string, t *tally, smp *sampler, name string, d time.Duration) ([]snapshot, error) {
	start := time.Now()
	if name == phaseWarmup {
		s.log.Printf("soak: priming the statement caches with %d distinct texts per instance", primeStatements)
		if err := prime(ctx, bed, addrs, t); err != nil {
			return nil, err
		}
	}
	w, err := startWorkload(ctx, bed, addrs, t)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	deadline := time.NewTimer(max(0, d-time.Since(start)))
	defer deadline.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			w.halt()
			return nil, fmt.Errorf("soak: interrupted: %w", ctx.Err())
		case <-deadline.C:
			break wait
		case <-tick.C:
			s.progress(name, time.Since(start), t, smp)
		}
	}
	_, err = smp.readAll(ctx)
	w.halt()
	if err != nil {
		return nil, err
	}
	all := smp.all()
	out := make([]snapshot, len(addrs))
	for i := range addrs {
		last := lastOf(all, name, i, loadedSamples)
		out[i] = snapshot{}
		for _, g := range gauges {
			out[i][g] = medianGauge(last, g)
		}
	}
	return out, nil
}

// progress logs one line a minute.
func (s *soak) progress(phase string, el time.Duration, t *tally, smp *sampler) {
	stmts, errs, _ := t.snapshot()
	var n int64
	for _, v := range stmts {
		n += v
	}
	line := fmt.Sprintf("soak: %s %s: %d statements/operations, errors %v", phase, el.Round(time.Second), n, errs)
	all := smp.all()
	for i := range smp.targets {
		if l := lastOf(all, phase, i, 1); len(l) == 1 {
			g := l[0].Gauges
			line += fmt.Sprintf("; #%d goroutines %.0f fds %.0f rss %.1f MiB conns %.0f", i,
				g["go_goroutines"], g["process_open_fds"], g["process_resident_memory_bytes"]/(1<<20), g["lockproxy_client_connections"])
		}
	}
	s.log.Print(line)
}

// drain waits up to drainTimeout for every instance to show no client
// connection, held lock or waiter, rests settleTime and takes the idle
// snapshot. drained is false when the gauges did not reach 0 in time.
func (s *soak) drain(ctx context.Context, smp *sampler) (idle []sample, drained bool, err error) {
	deadline := time.Now().Add(drainTimeout)
	for {
		ss, err := smp.readAll(ctx)
		if err == nil && quiet(ss) {
			drained = true
			break
		}
		if time.Now().After(deadline) {
			s.log.Printf("soak: instances not idle %s after the clients closed", drainTimeout)
			break
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return nil, false, err
		}
	}
	if err := sleepCtx(ctx, settleTime); err != nil {
		return nil, false, err
	}
	idle, err = smp.readAll(ctx)
	if err != nil {
		return nil, false, err
	}
	return idle, drained && quiet(idle), nil
}

// quiet reports whether no instance has a client connection, a held lock
// or a waiter.
func quiet(ss []sample) bool {
	for _, x := range ss {
		if x.Gauges["lockproxy_client_connections"] != 0 || x.Gauges["lockproxy_locks_held"] != 0 || x.Gauges["lockproxy_lock_waiters"] != 0 {
			return false
		}
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("soak: interrupted: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// startCPU starts measuring the primary mysqld's CPU; the function it
// returns gives the share of one core used since, in % (0 when unknown).
func startCPU(bed *env.Bed) func() float64 {
	pid, err := bed.PrimaryPID()
	if err != nil {
		return func() float64 { return 0 }
	}
	from, err := procstat.CPUTime(pid)
	at := time.Now()
	return func() float64 {
		to, err2 := procstat.CPUTime(pid)
		d := time.Since(at)
		if err != nil || err2 != nil || d <= 0 {
			return 0
		}
		return 100 * float64(to-from) / float64(d)
	}
}

// gaugesOf is a sample's gauges as a snapshot.
func gaugesOf(s sample) snapshot { return snapshot(s.Gauges) }

// meanLoad averages the host's busy share and each instance's CPU over
// samples.
func meanLoad(samples []sample, instances int) (float64, []float64) {
	var busy float64
	var nb int
	cpu := make([]float64, instances)
	n := make([]int, instances)
	for _, s := range samples {
		if s.Instance == 0 {
			busy += s.HostBusy
			nb++
		}
		if s.Instance < instances {
			cpu[s.Instance] += s.CPUPct
			n[s.Instance]++
		}
	}
	if nb > 0 {
		busy /= float64(nb)
	}
	for i := range cpu {
		if n[i] > 0 {
			cpu[i] /= float64(n[i])
		}
	}
	return busy, cpu
}

// counterSeries are the lockproxy counters reported over the measured run:
// metric name and label matchers, shown as name{matchers}.
var counterSeries = []struct {
	name  string
	match []string
}{
	{"lockproxy_queries_total", []string{`route="primary"`, `kind="query"`}},
	{"lockproxy_queries_total", []string{`route="primary"`, `kind="execute"`}},
	{"lockproxy_queries_total", []string{`route="replica"`, `kind="query"`}},
	{"lockproxy_queries_total", []string{`route="replica"`, `kind="execute"`}},
	{"lockproxy_lock_acquire_total", []string{`result="acquired"`}},
	{"lockproxy_lock_acquire_total", []string{`result="timeout"`}},
	{"lockproxy_lock_acquire_total", []string{`result="deadlock"`}},
	{"lockproxy_lock_acquire_total", []string{`result="unavailable"`}},
	{"lockproxy_lock_acquire_total", []string{`result="error"`}},
	{"lockproxy_lock_lease_lost_total", nil},
	{"lockproxy_rewrites_total", []string{`result="applied"`}},
	{"lockproxy_rewrites_total", []string{`result="conflicted"`}},
	{"lockproxy_rewrites_total", []string{`result="skipped"`}},
	{"lockproxy_statements_rejected_total", nil},
	{"lockproxy_auth_failures_total", nil},
	{"lockproxy_backend_errors_total", nil},
}

// counterDeltas is each reported counter's increase from the idle start to
// the idle end, per instance.
func counterDeltas(start, end []sample) []counterRow {
	var rows []counterRow
	for _, c := range counterSeries {
		name := c.name
		if len(c.match) > 0 {
			name += "{" + strings.Join(c.match, ",") + "}"
		}
		for i := range end {
			if i >= len(start) {
				break
			}
			rows = append(rows, counterRow{Name: name, Instance: i,
				Delta: end[i].Full.sum(c.name, c.match...) - start[i].Full.sum(c.name, c.match...)})
		}
	}
	return rows
}

// counterTotal sums a counter row over the instances.
func counterTotal(rows []counterRow, name string) float64 {
	var s float64
	for _, r := range rows {
		if r.Name == name {
			s += r.Delta
		}
	}
	return s
}

// waitReplica waits until the replica has the filled schema.
func waitReplica(ctx context.Context, bed *env.Bed) error {
	if bed.Replica == "" {
		return errors.New("soak: the bed has no replica")
	}
	db, err := sql.Open("mysql", bed.DSN(bed.Replica, ""))
	if err != nil {
		return fmt.Errorf("soak: replica: %w", err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n, c int
		err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+database+".catalog), (SELECT COUNT(*) FROM "+database+".counters)").Scan(&n, &c)
		if err == nil && n == catalogRows && c == counterKeys {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: replica has not applied the schema after 60 s (last: %d catalog rows, %v)", n, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// stockWatch tracks the lowest stock seen on the primary during the run.
type stockWatch struct {
	mu  sync.Mutex
	min int64
}

func (w *stockWatch) run(ctx context.Context, db *sql.DB, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var m int64
		if err := db.QueryRowContext(ctx, "SELECT MIN(stock) FROM sku_stock").Scan(&m); err == nil {
			w.mu.Lock()
			w.min = min(w.min, m)
			w.mu.Unlock()
		}
	}
}

func (w *stockWatch) lowest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min
}

// dbState is what the tables hold at the end, read on the primary.
type dbState struct {
	Stock      map[int64]int64 // by hot sku
	Orders     map[int64]int64
	Restocked  map[int64]int64
	MinStock   int64
	Abandoned  int64 // abandonSKU's stock
	CounterSum int64
}

func readState(ctx context.Context, db *sql.DB) (dbState, error) {
	st := dbState{Stock: map[int64]int64{}, Orders: map[int64]int64{}, Restocked: map[int64]int64{}}
	queries := []struct {
		q  string
		to map[int64]int64
	}{
		{fmt.Sprintf("SELECT sku_id, stock FROM sku_stock WHERE sku_id <= %d", hotSKUs), st.Stock},
		{"SELECT sku_id, COUNT(*) FROM orders GROUP BY sku_id", st.Orders},
		{"SELECT sku_id, SUM(qty) FROM restocks GROUP BY sku_id", st.Restocked},
	}
	for _, x := range queries {
		rows, err := db.QueryContext(ctx, x.q)
		if err != nil {
			return st, fmt.Errorf("soak: %s: %w", x.q, err)
		}
		for rows.Next() {
			var k, v int64
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return st, fmt.Errorf("soak: %s: %w", x.q, err)
			}
			x.to[k] = v
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return st, fmt.Errorf("soak: %s: %w", x.q, err)
		}
	}
	err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT MIN(stock), (SELECT stock FROM sku_stock WHERE sku_id = %d), (SELECT COALESCE(SUM(n),0) FROM counters) FROM sku_stock", abandonSKU)).
		Scan(&st.MinStock, &st.Abandoned, &st.CounterSum)
	if err != nil {
		return st, fmt.Errorf("soak: read state: %w", err)
	}
	return st, nil
}

// invariantInput is what the invariants are judged on.
type invariantInput struct {
	state      dbState
	tally      *tally
	minStock   int64 // lowest seen while running
	drained    bool
	idleEnd    []sample
	counters   []counterRow
	alive      int
	instances  int
	scrapeErrs int
	scrapeErr  error // the last failure, if any
	unexpected int64
}

// invariants judges the run's correctness checks.
func invariants(in invariantInput) []check {
	st := in.state
	var supplied, orders, stock, oversold, lost int64
	for k := int64(1); k <= hotSKUs; k++ {
		sup := initialStock + st.Restocked[k]
		supplied += sup
		orders += st.Orders[k]
		stock += st.Stock[k]
		if o := st.Orders[k] - sup; o > 0 {
			oversold += o
		}
		if d := sup - st.Stock[k] - st.Orders[k]; d != 0 {
			lost += abs(d)
		}
	}
	minSeen := min(in.minStock, st.MinStock)
	held, waiters, conns := 0.0, 0.0, 0.0
	for _, s := range in.idleEnd {
		held += s.Gauges["lockproxy_locks_held"]
		waiters += s.Gauges["lockproxy_lock_waiters"]
		conns += s.Gauges["lockproxy_client_connections"]
	}
	incr := in.tally.increments.Load()
	stmts, _, _ := in.tally.snapshot()
	var abandoned int64
	for k, v := range stmts {
		if strings.HasPrefix(k, "abandoned txn") {
			abandoned += v
		}
	}
	slow := in.tally.slowReleases.Load()
	maxRel := time.Duration(in.tally.maxRelease.Load())
	replica := counterTotal(in.counters, `lockproxy_queries_total{route="replica",kind="query"}`) +
		counterTotal(in.counters, `lockproxy_queries_total{route="replica",kind="execute"}`)
	applied := counterTotal(in.counters, `lockproxy_rewrites_total{result="applied"}`)
	return []check{
		{"unexpected client errors (any but 1205, 1213)", fmt.Sprint(in.unexpected), in.unexpected == 0},
		{"stock never negative", fmt.Sprintf("lowest stock seen %d", minSeen), minSeen >= 0},
		{"oversold units (orders beyond the stock supplied)", fmt.Sprintf("%d (supplied %d, orders %d)", oversold, supplied, orders), oversold == 0},
		{"sold units == order rows (lost stock updates)", fmt.Sprintf("sold %d, orders %d, lost %d", supplied-stock, orders, lost), lost == 0},
		{"rewrite counter == successful increments (lost updates)", fmt.Sprintf("counter %d, increments %d", st.CounterSum, incr), st.CounterSum == incr},
		{"rewrite rule applied", fmt.Sprintf("%.0f rewrites applied in the measured run", applied), applied > 0},
		{"reads routed to the replica", fmt.Sprintf("%.0f statements in the measured run", replica), replica > 0},
		{"abandoned transactions rolled back", fmt.Sprintf("sku %d stock %d (want %d)", abandonSKU, st.Abandoned, abandonStock), st.Abandoned == abandonStock},
		{fmt.Sprintf("abandoned locks free within %s", releaseBound), fmt.Sprintf("%d abandoned, %d late, slowest %s", abandoned, slow, maxRel.Round(time.Millisecond)), slow == 0 && abandoned > 0},
		{"no lock held, waited for or client connected at the end", fmt.Sprintf("held %.0f, waiters %.0f, connections %.0f", held, waiters, conns), in.drained && held == 0 && waiters == 0 && conns == 0},
		{"instances alive at the end", fmt.Sprintf("%d of %d", in.alive, in.instances), in.alive == in.instances},
		{"/metrics scrapes failed", scrapeText(in.scrapeErrs, in.scrapeErr), in.scrapeErrs == 0},
	}
}

// scrapeText is the count of failed scrapes and the last failure.
func scrapeText(n int, err error) string {
	if n == 0 || err == nil {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (last: %s)", n, cell(err.Error()))
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
