package sysbench

import (
	"math"
	"os"
	"slices"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestParse(t *testing.T) {
	tests := []struct {
		file string
		want Stats
	}{
		{"testdata/point_select_plain.txt", Stats{
			Transactions: 17941, TPS: 17923.21, Queries: 17941, QPS: 17923.21, Seconds: 1.0004, Events: 17941,
			MinMs: 0.03, MaxMs: 13.74, PctMs: 0.21, P99Ms: 0.21, SumMs: 993.22, AvgMs: 993.22 / 17941,
		}},
		{"testdata/read_write_histogram.txt", Stats{
			Transactions: 800, TPS: 398.91, Queries: 16000, QPS: 7978.27, Seconds: 2.0051, Events: 800,
			MinMs: 1.61, MaxMs: 200.52, PctMs: 11.87, SumMs: 4003.66, AvgMs: 4003.66 / 800,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(string(b))
			if err != nil {
				t.Fatal(err)
			}
			// The histogram percentiles are checked separately.
			if tt.want.P99Ms == 0 {
				if got.P95Ms <= 0 || got.P99Ms < got.P95Ms || got.P99Ms > got.MaxMs {
					t.Fatalf("histogram percentiles p95=%v p99=%v max=%v", got.P95Ms, got.P99Ms, got.MaxMs)
				}
				tt.want.P95Ms, tt.want.P99Ms = got.P95Ms, got.P99Ms
			}
			if !near(got.AvgMs, tt.want.AvgMs) {
				t.Fatalf("AvgMs = %v, want %v", got.AvgMs, tt.want.AvgMs)
			}
			got.AvgMs = tt.want.AvgMs
			if got != tt.want {
				t.Fatalf("Parse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "FATAL: unable to connect", "transactions: 0 (0.00 per sec.)"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q): want an error", in)
		}
	}
}

func TestPercentile(t *testing.T) {
	hist := []Bucket{{3, 1}, {1, 90}, {2, 8}, {4, 1}}
	tests := []struct {
		pct  float64
		want float64
	}{{50, 1}, {90, 1}, {95, 2}, {98, 2}, {99, 3}, {100, 4}}
	for _, tt := range tests {
		if got := Percentile(hist, tt.pct); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.pct, got, tt.want)
		}
	}
	if Percentile(nil, 99) != 0 {
		t.Error("empty histogram: want 0")
	}
}

func TestArgs(t *testing.T) {
	w := Workload{Test: "oltp_point_select", Host: "127.0.0.1", Port: 1, Threads: 8, Seconds: 3, PSMode: "auto", Tables: 4, TableSize: 10}
	a := w.args("run")
	for _, want := range []string{"--threads=8", "--time=3", "--db-ps-mode=auto", "--percentile=99", "run"} {
		if !slices.Contains(a, want) {
			t.Errorf("args lack %q: %v", want, a)
		}
	}
	if p := w.args("prepare"); p[len(p)-1] != "prepare" || slices.Contains(p, "--threads=8") {
		t.Errorf("prepare args = %v", p)
	}
}
