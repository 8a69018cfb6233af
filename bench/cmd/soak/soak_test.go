package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestParseExposition(t *testing.T) {
	in := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 21
process_open_fds 32
lockproxy_queries_total{kind="query",route="primary"} 100
lockproxy_queries_total{kind="execute",route="primary"} 7
lockproxy_queries_total{kind="query",route="replica"} 3e+01
lockproxy_lock_hot_key_wait_seconds{key="a} b\"c",rule="r"} 0.5
lockproxy_replica_lag_seconds{backend="x"} NaN
`
	m, err := parseExposition(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		match []string
		want  float64
	}{
		{"go_goroutines", nil, 21},
		{"process_open_fds", nil, 32},
		{"lockproxy_queries_total", nil, 137},
		{"lockproxy_queries_total", []string{`route="primary"`}, 107},
		{"lockproxy_queries_total", []string{`route="primary"`, `kind="execute"`}, 7},
		{"lockproxy_queries_total", []string{`route="replica"`, `kind="execute"`}, 0},
		{"lockproxy_lock_hot_key_wait_seconds", []string{`rule="r"`}, 0.5},
		{"absent", nil, 0},
	}
	for _, tt := range tests {
		if got := m.sum(tt.name, tt.match...); got != tt.want {
			t.Errorf("sum(%s, %v) = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	if !m.has("lockproxy_replica_lag_seconds") || m.has("absent") {
		t.Error("has is wrong")
	}
	for _, bad := range []string{"x{a=\"1\" 2\n", "x\n", "x abc\n", "{a=\"1\"} 2\n"} {
		if _, err := parseExposition(strings.NewReader(bad)); err == nil {
			t.Errorf("parseExposition(%q): want an error", bad)
		}
	}
}

func TestBounds(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		b          bound
		start, end float64
		ok         bool
	}{
		{bounds[0], 21, 31, true}, // goroutines: +10 allowed
		{bounds[0], 21, 32, false},
		{bounds[1], 32, 37, true}, // fds: +5
		{bounds[1], 32, 38, false},
		{bounds[2], 40 * mib, 56 * mib, true}, // small start: +16 MiB wins over 25%
		{bounds[2], 40 * mib, 56*mib + 1, false},
		{bounds[2], 100 * mib, 125 * mib, true}, // large start: 25% wins
		{bounds[2], 100 * mib, 126 * mib, false},
		{bounds[3], 30 * mib, 20 * mib, true}, // shrinking is fine
	}
	for _, tt := range tests {
		if got := tt.end <= tt.b.limit(tt.start); got != tt.ok {
			t.Errorf("%s %s: start %v end %v: ok = %v, want %v", tt.b.Metric, tt.b.State, tt.start, tt.end, got, tt.ok)
		}
	}
	if got := bounds[0].text(); got != "start + 10" {
		t.Errorf("goroutine bound text = %q", got)
	}
	if got := bounds[2].text(); got != "start + max(25%, 16.0 MiB)" {
		t.Errorf("rss bound text = %q", got)
	}
}

// snap builds a snapshot of goroutines, fds, rss and heap.
func snap(g, fd, rss, heap float64) snapshot {
	return snapshot{"go_goroutines": g, "process_open_fds": fd, "process_resident_memory_bytes": rss, "go_memstats_heap_inuse_bytes": heap}
}

func TestCompare(t *testing.T) {
	const mib = 1 << 20
	per := []snapshots{
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(22, 33, 90*mib, 50*mib),
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 70*mib, 30*mib)},
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(40, 33, 60*mib, 27*mib), // goroutine leak
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 60*mib, 80*mib)}, // heap growth
	}
	rows := compare(per)
	if len(rows) != 2*(len(bounds)+len(infos)) {
		t.Fatalf("compare: %d rows", len(rows))
	}
	failed := map[string]bool{}
	for _, r := range rows {
		if r.Bound != "" && !r.OK {
			failed[fmt.Sprintf("%s/%s/%d", r.Metric, r.State, r.Instance)] = true
		}
		if r.Bound == "" && !r.OK {
			t.Errorf("reading-only row %+v marked failed", r)
		}
	}
	want := map[string]bool{"go_goroutines/idle/1": true, "go_memstats_heap_inuse_bytes/under load/1": true}
	if fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Fatalf("failed rows = %v, want %v", failed, want)
	}
	// Idle memory grew a lot on instance 0, but it is a reading only.
	r := &report{Rows: rows[:2*len(bounds)]}
	if r.ok() {
		t.Fatal("report with failed bounds is ok")
	}
	r = &report{Rows: compare(per[:1]), Checks: []check{{Name: "x", OK: true}}}
	if !r.ok() {
		t.Fatal("report of instance 0 should pass")
	}
	r.Checks = append(r.Checks, check{Name: "y", OK: false})
	if r.ok() || r.verdict() != "FAIL" {
		t.Fatal("a failed invariant must fail the report")
	}
}

func TestMarkdown(t *testing.T) {
	const mib = 1 << 20
	r := &report{
		Command: "go run ./bench/cmd/soak -duration 5m", Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Warmup: 2 * time.Minute, Duration: 5 * time.Minute, Sample: 10 * time.Second,
		Rows: compare([]snapshots{{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(21, 32, 61*mib, 27*mib),
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 50, 62*mib, 28*mib)}}),
		Checks:   []check{{Name: "stock never negative", Value: "lowest 0", OK: true}},
		Stmts:    map[string]int64{"b": 2, "a": 1},
		Errs:     map[string]int64{"1205": 3, "bad-connection": 1},
		Msgs:     map[string]string{"bad-connection": "x|y\nz"},
		Counters: []counterRow{{Name: `lockproxy_queries_total{route="replica"}`, Instance: 0, Delta: 5}},
		HostBusy: 0.6, ProxyCPU: []float64{20},
		CSV: "bench/results/soak.csv",
	}
	md := r.markdown()
	for _, want := range []string{
		"## Latest run\n", "**PASS**", "2026-01-02 03:04 UTC",
		"| metric | instance | start | end | bound | ok |",
		"| go_goroutines (idle) | 0 | 21 | 21 | start + 10 | yes |",
		"| process_resident_memory_bytes (under load) | 0 | 60.0 MiB | 62.0 MiB | start + max(25%, 16.0 MiB) | yes |",
		"| go_goroutines (under load) | 0 | 30 | 30 | (reading only) | — |",
		"| stock never negative | lowest 0 | yes |",
		"| a | 1 |\n| b | 2 |\n| **total** | **3** |",
		"| 1205 | 3 | yes (contention) |",
		`| bad-connection | 1 | no | x\|y z |`,
		"host was 60% busy", "instance 0 used 20% of a core",
		"Series: `bench/results/soak.csv`.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestReplaceLatest(t *testing.T) {
	section := "## Latest run\n\nnew\n"
	tests := []struct{ doc, want string }{
		{"", section},
		{"# Soak\n\ntext\n\n## Latest run\n\nold\nmore\n", "# Soak\n\ntext\n\n" + section},
		{"# Soak\n\ntext", "# Soak\n\ntext\n\n" + section},
		{"## Latest run\nold\n", section},
		{"# Soak\n\n## Latest runs elsewhere\n", "# Soak\n\n## Latest runs elsewhere\n\n" + section}, // only the exact heading
	}
	for _, tt := range tests {
		if got := replaceLatest(tt.doc, section); got != tt.want {
			t.Errorf("replaceLatest(%q) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}

func TestErrCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&mysql.MySQLError{Number: 1205}, "1205"},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1213}), "1213"},
		{mysql.ErrInvalidConn, "bad-connection"},
		{fmt.Errorf("%w: short", errCheck), "check"},
		{io.EOF, "other"},
		{errors.New("x"), "other"},
	}
	for _, tt := range tests {
		if got := errCode(tt.err); got != tt.want {
			t.Errorf("errCode(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if n := unexpected(map[string]int64{"1205": 5, "1213": 2, "1105": 1, "check": 2}); n != 3 {
		t.Errorf("unexpected = %d, want 3", n)
	}
}

func TestStmt(t *testing.T) {
	q, a := stmt(false, "UPDATE t SET n = %d WHERE id = %d", 5, 7)
	if q != "UPDATE t SET n = 5 WHERE id = 7" || a != nil {
		t.Errorf("text stmt = %q %v", q, a)
	}
	q, a = stmt(true, "UPDATE t SET n = %d WHERE id = %d", 5, 7)
	if q != "UPDATE t SET n = ? WHERE id = ?" || fmt.Sprint(a) != "[5 7]" {
		t.Errorf("prepared stmt = %q %v", q, a)
	}
}

func TestInvariants(t *testing.T) {
	ok := dbState{
		Stock:     map[int64]int64{1: 10, 2: 0, 3: 200, 4: 5},
		Orders:    map[int64]int64{1: 390, 2: 200, 3: 0, 4: 195},
		Restocked: map[int64]int64{1: 200},
		Abandoned: abandonStock, CounterSum: 42,
	}
	tl := newTally()
	tl.increments.Store(42)
	tl.add("abandoned txn holding a row lock (TCP reset)", 3)
	idle := []sample{{Gauges: map[string]float64{}}, {Gauges: map[string]float64{}}}
	counters := []counterRow{
		{Name: `lockproxy_queries_total{route="replica",kind="query"}`, Delta: 10},
		{Name: `lockproxy_rewrites_total{result="applied"}`, Delta: 4},
	}
	in := invariantInput{state: ok, tally: tl, drained: true, idleEnd: idle, counters: counters, alive: 2, instances: 2}
	for _, c := range invariants(in) {
		if !c.OK {
			t.Errorf("clean run: %s failed: %s", c.Name, c.Value)
		}
	}
	bad := in
	bad.state.Orders = map[int64]int64{1: 401, 2: 200, 3: 0, 4: 195} // one oversold, one lost
	bad.state.CounterSum = 41
	bad.minStock = -1
	bad.unexpected = 1
	bad.alive = 1
	failed := map[string]bool{}
	for _, c := range invariants(bad) {
		if !c.OK {
			failed[c.Name] = true
		}
	}
	for _, name := range []string{
		"unexpected client errors (any but 1205, 1213)", "stock never negative",
		"oversold units (orders beyond the stock supplied)", "sold units == order rows (lost stock updates)",
		"rewrite counter == successful increments (lost updates)", "instances alive at the end",
	} {
		if !failed[name] {
			t.Errorf("broken run: %q did not fail", name)
		}
	}
}

func TestRenderCSV(t *testing.T) {
	var b bytes.Buffer
	s := sample{Elapsed: 1500 * time.Millisecond, Phase: phaseLoad, Instance: 1, HWM: 7, CPUPct: 12.34, HostBusy: 0.5,
		Gauges: map[string]float64{"go_goroutines": 30, "process_resident_memory_bytes": 1 << 20}}
	if err := renderCSV(&b, []sample{s}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("csv:\n%s", b.String())
	}
	if want := "elapsed_s,instance,phase,go_goroutines,process_open_fds,process_resident_memory_bytes,go_memstats_heap_inuse_bytes," +
		"lockproxy_client_connections,lockproxy_locks_held,lockproxy_lock_waiters,hwm_bytes,cpu_pct,host_busy_pct"; lines[0] != want {
		t.Errorf("header = %q", lines[0])
	}
	if want := "1.5,1,load,30,0,1048576,0,0,0,0,7,12.3,50.0"; lines[1] != want {
		t.Errorf("row = %q, want %q", lines[1], want)
	}
}

func TestLastOfMedian(t *testing.T) {
	var ss []sample
	for i, v := range []float64{5, 1, 9, 3, 7} {
		ss = append(ss, sample{Phase: phaseLoad, Instance: i % 2, Gauges: map[string]float64{"go_goroutines": v}})
	}
	last := lastOf(ss, phaseLoad, 0, 3) // values 7, 9, 5 (instance 0)
	if len(last) != 3 || medianGauge(last, "go_goroutines") != 7 {
		t.Fatalf("lastOf/median = %v / %v", last, medianGauge(last, "go_goroutines"))
	}
	if medianGauge(lastOf(ss, phaseLoad, 1, 3), "go_goroutines") != 2 {
		t.Fatal("median of an even count")
	}
	if medianGauge(nil, "go_goroutines") != 0 {
		t.Fatal("median of nothing")
	}
}

func TestOutputs(t *testing.T) {
	out, csv := outputs("/r", flags{})
	if out != "/r/bench/SOAK.md" || csv != "/r/bench/results/soak.csv" {
		t.Errorf("defaults = %s %s", out, csv)
	}
	out, csv = outputs("/r", flags{out: "/tmp/x.md"})
	if out != "/tmp/x.md" || csv != "/tmp/x.csv" {
		t.Errorf("with -out = %s %s", out, csv)
	}
	if _, csv = outputs("/r", flags{out: "/tmp/x.md", csv: "/tmp/y.csv"}); csv != "/tmp/y.csv" {
		t.Errorf("with -csv = %s", csv)
	}
	if _, err := parseFlags([]string{"-duration", "0s"}, io.Discard); err == nil {
		t.Error("want an error for -duration 0s")
	}
	f, err := parseFlags(nil, io.Discard)
	if err != nil || f.duration != 30*time.Minute || f.warmup != 2*time.Minute || f.sample != 10*time.Second {
		t.Errorf("defaults = %+v, %v", f, err)
	}
}

func TestRepoRelative(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/r/bench/results/soak.csv", "bench/results/soak.csv"},
		{"/tmp/x.csv", "/tmp/x.csv"},
	} {
		if got := repoRelative("/r", c.path); got != c.want {
			t.Errorf("repoRelative(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}
