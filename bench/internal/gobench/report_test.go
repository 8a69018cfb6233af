package gobench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// sample is three rounds: the parser fast in two of them, redislock's
// hot-key benchmark skipped, zklock not building.
func sample() []Invocation {
	line := func(name string, ns float64, extra ...float64) Line {
		m := map[string]float64{UnitNs: ns, UnitBytes: 100, UnitAllocs: 3}
		if len(extra) > 0 {
			m["roundtrips/op"] = extra[0]
		}
		return Line{Name: name, N: 1000, Metrics: m}
	}
	var invs []Invocation
	for round, ns := range []float64{15000, 30000, 16000} {
		invs = append(invs,
			Invocation{Round: round + 1, Pkg: "./parser/", OK: true, Lines: []Line{line("BenchmarkAnalyzeKeyedUpdate", ns), line("BenchmarkCacheHit", ns/100),
				line("BenchmarkRewriteUpdate/delta", ns/10), line("BenchmarkRewriteUpdate/relative", ns/5), line("BenchmarkRewriteUpdateOther", 1)}},
			Invocation{Round: round + 1, Pkg: "./lockmgr/memlock/", OK: true, Lines: []Line{line("BenchmarkUncontended", 900), line("BenchmarkHotKeyHandoff", 2000)}},
			Invocation{Round: round + 1, Pkg: "./lockmgr/redislock/", OK: true, Lines: []Line{line("BenchmarkUncontended", 300000+ns, 2)},
				Ended: []Status{{Name: "BenchmarkHotKeyHandoff", Result: "SKIP", Log: "bench_test.go:33: no test bed\nmore"}}},
			Invocation{Round: round + 1, Pkg: "./lockmgr/zklock/", Attempts: 3, Error: "FAIL\tgithub.com/lockproxy/lockproxy/lockmgr/zklock [build failed]\n# details | here"},
		)
	}
	return invs
}

func sampleData() Data {
	invs := sample()
	return Data{Benchtime: "1s", Rounds: 3, Invocations: invs, Benches: Aggregate(Specs(), invs)}
}

func TestAggregate(t *testing.T) {
	d := sampleData()
	if len(d.Benches) != 13+1+8+2+12 {
		t.Fatalf("got %d benches, want one per wanted benchmark and sub-benchmark (36)", len(d.Benches))
	}
	if d.Benches[12].Name != "BenchmarkRewriteUpdate/delta" || d.Benches[13].Name != "BenchmarkRewriteUpdate/relative" {
		t.Errorf("sub-benchmarks not in place of their parent: %v %v", d.Benches[12].Name, d.Benches[13].Name)
	}
	tests := []struct {
		pkg, name string
		runs      int
		ns        float64
		missing   string
	}{
		{"./parser/", "BenchmarkAnalyzeKeyedUpdate", 3, 16000, ""},
		{"./parser/", "BenchmarkCacheHit", 3, 160, ""},
		{"./parser/", "BenchmarkRewriteUpdate/relative", 3, 3200, ""},
		{"./rules/", "BenchmarkMatch", 0, 0, "no result line"},
		{"./lockmgr/redislock/", "BenchmarkUncontended", 3, 316000, ""},
		{"./lockmgr/redislock/", "BenchmarkHotKeyHandoff", 0, 0, "SKIP: bench_test.go:33: no test bed"},
		{"./lockmgr/zklock/", "BenchmarkUncontended", 0, 0, "FAIL: FAIL\tgithub.com/lockproxy/lockproxy/lockmgr/zklock [build failed]"},
	}
	for _, tt := range tests {
		t.Run(tt.pkg+tt.name, func(t *testing.T) {
			b, ok := d.Find(tt.pkg, tt.name)
			if !ok {
				t.Fatal("not found")
			}
			if b.Runs != tt.runs || b.Ns() != tt.ns || b.Missing != tt.missing {
				t.Fatalf("got runs %d ns %v missing %q, want %d %v %q", b.Runs, b.Ns(), b.Missing, tt.runs, tt.ns, tt.missing)
			}
		})
	}
	b, _ := d.Find("./parser/", "BenchmarkAnalyzeKeyedUpdate")
	if b.NsMin != 15000 || b.NsMax != 30000 || b.Median[UnitAllocs] != 3 {
		t.Errorf("spread/allocs = %v %v %v", b.NsMin, b.NsMax, b.Median)
	}
	if r, _ := d.Find("./lockmgr/redislock/", "BenchmarkUncontended"); r.Median["roundtrips/op"] != 2 {
		t.Errorf("custom metric lost: %v", r.Median)
	}
}

func TestTargets(t *testing.T) {
	d := sampleData()
	tg := targets(d)
	if len(tg) != 2 {
		t.Fatalf("targets = %+v", tg)
	}
	// 16 µs median ≤ 20 µs although one round took 30 µs; 160 ns ≤ 1 µs.
	if !tg[0].Met || tg[0].Got != "16.0 µs" || tg[0].Want != "≤ 20.0 µs" || !tg[1].Met || tg[1].Got != "160 ns" {
		t.Errorf("targets = %+v", tg)
	}
	for i := range d.Invocations {
		for j := range d.Invocations[i].Lines {
			d.Invocations[i].Lines[j].Metrics[UnitNs] *= 10
		}
	}
	d.Benches = Aggregate(Specs(), d.Invocations)
	if tg := targets(d); tg[0].Met || tg[1].Met || tg[1].Got != "1.6 µs" {
		t.Errorf("ten times slower still met: %+v", tg)
	}
	d.Benches = Aggregate(Specs(), nil)
	if tg := targets(d); tg[0].Met || !strings.HasPrefix(tg[0].Got, "missing") {
		t.Errorf("missing benchmark met: %+v", tg)
	}
}

func TestReport(t *testing.T) {
	r := &results.Result{Scenario: "gobench"}
	if err := r.SetData(sampleData()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-benchtime 1s -count 1",
		"| `./parser/` | `BenchmarkAnalyzeKeyedUpdate` | **16.0 µs** | 15.0 µs–30.0 µs | 100 | 3 | 3 |",
		"| `./parser/` | `BenchmarkRewriteUpdate/delta` | **1.6 µs** |",
		"| `./rules/` | `BenchmarkMatch` | missing |",
		"| memlock | **900 ns** |",
		"| redislock | **316.0 µs** | 315.0 µs–330.0 µs | 100 | 3 | missing |  | Uncontended roundtrips/op: 2 |",
		"| zklock | missing |",
		"![gobench-locks.png](results/gobench-locks.png)",
		"- `./lockmgr/redislock/` `BenchmarkHotKeyHandoff`: SKIP: bench_test.go:33: no test bed",
		"| `./lockmgr/zklock/` | 2 | 0.0 | 0% |  | FAIL: FAIL github.com/lockproxy/lockproxy/lockmgr/zklock [build failed] (retried: 3 attempts) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, ChartFile)); err != nil || fi.Size() == 0 {
		t.Fatalf("chart not written: %v", err)
	}
	if strings.Index(md, "BenchmarkMatch") > strings.Index(md, "| memlock |") {
		t.Error("rules table after the lock table")
	}
}

func TestReportBadData(t *testing.T) {
	r := &results.Result{Scenario: "gobench", Data: []byte(`{"benches": 5}`)}
	if _, err := New().Report(r, t.TempDir(), "."); err == nil {
		t.Fatal("want an error for undecodable data")
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine(" a|b\n\tc "); got != `a\|b  c` {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine(strings.Repeat("y", 300)); len(got) != 200+len("…") {
		t.Errorf("oneLine kept %d bytes", len(got))
	}
}

func TestDur(t *testing.T) {
	tests := map[float64]string{0: "–", 49.42: "49 ns", 999: "999 ns", 18234: "18.2 µs", 2.5e6: "2.50 ms"}
	for in, want := range tests {
		if got := Dur(in); got != want {
			t.Errorf("Dur(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestDecades(t *testing.T) {
	tests := map[float64]string{-1: "0.1 µs", 0: "1 µs", 2: "100 µs", 3: "1 ms", 4: "10 ms"}
	for e, want := range tests {
		if got := DecadeLabel(e); got != want {
			t.Errorf("DecadeLabel(%v) = %q, want %q", e, got, want)
		}
	}
	ts := decades{base: -1}.Ticks(0, 2)
	var labels []string
	for _, tk := range ts {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if strings.Join(labels, ",") != "0.1 µs,1 µs,10 µs" || len(ts) != 3+2*8 {
		t.Errorf("ticks = %v (%d)", labels, len(ts))
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args(Specs()[1], "200ms"), " ")
	want := "test -run ^$ -bench ^(BenchmarkMatch|BenchmarkEncodeKey|BenchmarkTextKeyASCII|BenchmarkTextKeyServerCached|BenchmarkTextKeyServerFirst|BenchmarkNumberKeyString|BenchmarkNumberKeyServerCached|BenchmarkNumberKeyServerFirst)$ -benchtime 200ms -count 1 -v -timeout 10m ./rules/"
	if got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if be := Specs()[3].Backend(); be != "memlock" {
		t.Errorf("Backend = %q", be)
	}
}

func TestBuildFailedSummarize(t *testing.T) {
	build := []byte("# github.com/x/lockmgr/redislock\nlockmgr/redislock/locker.go:12:2: undefined: gate\nFAIL\tgithub.com/x/lockmgr/redislock [build failed]\nFAIL\n")
	if !BuildFailed(build) || BuildFailed([]byte("--- FAIL: BenchmarkX\nFAIL\tpkg\t1.0s\n")) {
		t.Error("BuildFailed misjudged")
	}
	s := Summarize(build, errors.New("exit status 1"), nil)
	if firstLine(s) != "FAIL\tgithub.com/x/lockmgr/redislock [build failed]" || !strings.Contains(s, "undefined: gate") {
		t.Errorf("Summarize = %q", s)
	}
	if s := Summarize([]byte("signal: killed"), errors.New("exit status 2"), nil); firstLine(s) != "exit status 2" {
		t.Errorf("Summarize without a FAIL line = %q", s)
	}
	if s := Summarize(nil, nil, ErrParse); firstLine(s) != ErrParse.Error() {
		t.Errorf("Summarize of a parse error = %q", s)
	}
	long := []byte(strings.Repeat("x", 5000))
	if s := Summarize(long, errors.New("e"), nil); len(s) > 3100 {
		t.Errorf("Summarize kept %d bytes", len(s))
	}
}

// TestSplitCost: what a split adds is lockproxy's split − whole less
// direct's; nothing is said without all four arms.
func TestSplitCost(t *testing.T) {
	arm := func(name string, ns float64) Bench {
		return Bench{Group: GroupProxy, Pkg: "./proxy/", Name: "BenchmarkSplitText/" + name, Runs: 3, Median: map[string]float64{UnitNs: ns}}
	}
	d := Data{Benches: []Bench{arm("direct/whole", 100e3), arm("direct/split", 110e3), arm("lockproxy/whole", 150e3), arm("lockproxy/split", 250e3)}}
	if got := splitCost(d); !strings.Contains(got, "**90.0 µs**") || !strings.Contains(got, "split − whole 100.0 µs") {
		t.Errorf("splitCost = %q", got)
	}
	d.Benches[1] = arm("direct/split", 95e3)
	if got := splitCost(d); !strings.Contains(got, "**105.0 µs**") || !strings.Contains(got, "direct split − whole −5.0 µs") {
		t.Errorf("splitCost with the direct split faster = %q", got)
	}
	if got := splitCost(Data{Benches: d.Benches[:3]}); got != "" {
		t.Errorf("splitCost with an arm missing = %q", got)
	}
}
