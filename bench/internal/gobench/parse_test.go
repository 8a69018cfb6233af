package gobench

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseVerbose(t *testing.T) {
	f, err := os.Open("testdata/verbose.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pkg, name string
		procs     int
		n         int64
		metrics   map[string]float64
	}{
		{"github.com/lockproxy/lockproxy/parser", "BenchmarkAnalyzeKeyedUpdate", 2, 61234, map[string]float64{UnitNs: 18234, UnitBytes: 5120, UnitAllocs: 61}},
		{"github.com/lockproxy/lockproxy/parser", "BenchmarkCacheHit", 2, 2170641, map[string]float64{UnitNs: 49.42, UnitBytes: 0, UnitAllocs: 0}},
		{"github.com/lockproxy/lockproxy/lockmgr/redislock", "BenchmarkUncontended", 2, 4021, map[string]float64{UnitNs: 301234, "roundtrips/op": 2, UnitBytes: 1480, UnitAllocs: 31}},
		{"github.com/lockproxy/lockproxy/lockmgr/zklock", "BenchmarkHotKeyHandoff", 8, 100, map[string]float64{UnitNs: 2.5e6}},
	}
	if len(out.Lines) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(out.Lines), len(want), out.Lines)
	}
	for i, w := range want {
		t.Run(w.name, func(t *testing.T) {
			l := out.Lines[i]
			if l.Pkg != w.pkg || l.Name != w.name || l.Procs != w.procs || l.N != w.n || len(l.Metrics) != len(w.metrics) {
				t.Fatalf("line %d = %+v, want %+v", i, l, w)
			}
			for unit, v := range w.metrics {
				if got, ok := l.Metrics[unit]; !ok || got != v {
					t.Errorf("%s = %v (present %v), want %v", unit, got, ok, v)
				}
			}
		})
	}
	if len(out.Ended) != 2 {
		t.Fatalf("ended = %+v, want a SKIP and a FAIL", out.Ended)
	}
	skip, fail := out.Ended[0], out.Ended[1]
	if skip.Result != "SKIP" || skip.Name != "BenchmarkHotKeyHandoff" || !strings.Contains(skip.Log, "no test bed") || !strings.HasSuffix(skip.Pkg, "redislock") {
		t.Errorf("skip = %+v", skip)
	}
	if fail.Result != "FAIL" || fail.Name != "BenchmarkUncontended" || fail.Log != "bench_test.go:30: zk: connection closed\nsecond line of the error" {
		t.Errorf("fail = %+v", fail)
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		lines   int
		wantErr bool
	}{
		{"plain, no -v and no allocs", "BenchmarkX-4\t100\t12.5 ns/op\n", 1, false},
		{"no procs suffix", "BenchmarkX 100 12.5 ns/op\n", 1, false},
		{"throughput unit", "BenchmarkX-2 10 100 ns/op 55.1 MB/s\n", 1, false},
		{"bare name", "BenchmarkX\n", 0, false},
		{"name then log text", "BenchmarkX-2   some log output here\n", 0, false},
		{"sub-benchmark name with dash", "BenchmarkX/size-10-2 5 7 ns/op\n", 1, false},
		{"bad value", "BenchmarkX-2 100 abc ns/op\n", 0, true},
		{"value without a per unit", "BenchmarkX-2 100 12 ns\n", 0, true},
		{"not a benchmark", "PASS\nok  \tpkg\t1s\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("err = %v, want ErrParse", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Lines) != tt.lines {
				t.Fatalf("lines = %+v, want %d", out.Lines, tt.lines)
			}
		})
	}
}

func TestStripProcs(t *testing.T) {
	tests := map[string]string{
		"BenchmarkCacheHit-2":     "BenchmarkCacheHit",
		"BenchmarkCacheHit":       "BenchmarkCacheHit",
		"BenchmarkX/size-10-16":   "BenchmarkX/size-10",
		"BenchmarkX/mode-fast":    "BenchmarkX/mode-fast",
		"BenchmarkHotKeyHandoff-": "BenchmarkHotKeyHandoff-",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if got := stripProcs(in); got != want {
				t.Errorf("stripProcs(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/verbose.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("BenchmarkX-2 1 1 ns/op\n--- FAIL: BenchmarkX\n")
	f.Fuzz(func(t *testing.T, s string) {
		out, err := Parse(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, l := range out.Lines {
			if !strings.HasPrefix(l.Name, "Benchmark") || l.Metrics == nil {
				t.Fatalf("parsed a line that is no benchmark result: %+v", l)
			}
		}
	})
}
