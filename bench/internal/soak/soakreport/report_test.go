package soakreport

import (
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/soak/growth"
	"github.com/lockproxy/lockproxy/bench/internal/soak/invariant"
	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
)

const mib = 1 << 20

// snap builds a snapshot of goroutines, fds, rss and heap.
func snap(g, fd, rss, heap float64) growth.Snapshot {
	return growth.Snapshot{"go_goroutines": g, "process_open_fds": fd, "process_resident_memory_bytes": rss, "go_memstats_heap_inuse_bytes": heap}
}

func TestOK(t *testing.T) {
	per := []growth.Snapshots{
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(22, 33, 90*mib, 50*mib),
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 70*mib, 30*mib)},
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(40, 33, 60*mib, 27*mib), // goroutine leak
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 60*mib, 80*mib)}, // heap growth
	}
	rows := growth.Compare(per)
	r := &Report{Rows: rows[:2*len(growth.Bounds)]}
	if r.OK() {
		t.Fatal("report with failed bounds is ok")
	}
	// Idle memory grew a lot on instance 0, but it is a reading only.
	r = &Report{Rows: growth.Compare(per[:1]), Checks: []invariant.Check{{Name: "x", OK: true}}}
	if !r.OK() {
		t.Fatal("report of instance 0 should pass")
	}
	r.Checks = append(r.Checks, invariant.Check{Name: "y", OK: false})
	if r.OK() || r.Verdict() != "FAIL" {
		t.Fatal("a failed invariant must fail the report")
	}
}

func TestMarkdown(t *testing.T) {
	r := &Report{
		Command: "go run ./bench/cmd/soak -duration 5m", Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Warmup: 2 * time.Minute, Duration: 5 * time.Minute, Sample: 10 * time.Second,
		Rows: growth.Compare([]growth.Snapshots{{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(21, 32, 61*mib, 27*mib),
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 50, 62*mib, 28*mib)}}),
		Checks:   []invariant.Check{{Name: "stock never negative", Value: "lowest 0", OK: true}},
		Stmts:    map[string]int64{"b": 2, "a": 1},
		Errs:     map[string]int64{"1205": 3, "bad-connection": 1},
		Msgs:     map[string]string{"bad-connection": "x|y\nz"},
		Counters: []sampling.CounterRow{{Name: `lockproxy_queries_total{route="replica"}`, Instance: 0, Delta: 5}},
		HostBusy: 0.6, ProxyCPU: []float64{20},
		CSV: "bench/results/soak.csv",
	}
	md := r.Markdown()
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
