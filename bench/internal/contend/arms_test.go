package contend

import (
	"strings"
	"testing"
)

func sample(round, done int, secs, p50, p99 float64) Sample {
	return Sample{Round: round, Run: Run{Done: done, Attempts: done, Seconds: secs, Latency: Latency{P50Ms: p50, P99Ms: p99}}}
}

func TestSummarise(t *testing.T) {
	rs := []Result{
		{Name: "base", Samples: []Sample{sample(1, 100, 1, 10, 20), sample(2, 300, 1, 10, 20), sample(3, 200, 1, 10, 20)}},
		// Paired per round: 50/100, 300/300, 300/200 -> ratios 0.5, 1, 1.5.
		{Name: "arm", Baseline: "base", Instances: 2, Samples: []Sample{
			sample(1, 50, 1, 20, 80), sample(2, 300, 1, 10, 20), sample(3, 300, 1, 5, 10),
		}},
		{Name: "orphan", Baseline: "missing", Samples: []Sample{sample(1, 10, 1, 1, 1)}},
	}
	rs[1].Samples[0].Lost, rs[1].Samples[2].Lost = 3, 1
	rs[1].Samples[1].Oversold = 7
	Summarise(rs)
	base, arm, orphan := rs[0], rs[1], rs[2]
	if base.DonePerSec != 200 || base.DoneRatio != 0 {
		t.Errorf("base: done/s %v ratio %v, want 200 and none", base.DonePerSec, base.DoneRatio)
	}
	if arm.DonePerSec != 300 {
		t.Errorf("arm done/s median = %v, want 300", arm.DonePerSec)
	}
	// The median of paired ratios (1.0) differs from the ratio of medians (1.5).
	if arm.DoneRatio != 1 {
		t.Errorf("arm done ratio = %v, want 1 (median of 0.5, 1, 1.5)", arm.DoneRatio)
	}
	if arm.P50Ratio != 1 || arm.P99Ratio != 1 {
		t.Errorf("arm latency ratios = %v / %v, want 1 / 1 (medians of 2,1,0.5 and 4,1,0.5)", arm.P50Ratio, arm.P99Ratio)
	}
	if arm.LostMax != 3 || arm.OversoldMax != 7 {
		t.Errorf("arm worst lost %d oversold %d, want 3 and 7", arm.LostMax, arm.OversoldMax)
	}
	if orphan.DoneRatio != 0 {
		t.Errorf("an arm whose baseline is missing got ratio %v", orphan.DoneRatio)
	}
	if got := PairedRatio(arm, base, Run.DonePerSec); got != 1 {
		t.Errorf("PairedRatio = %v, want 1", got)
	}
}

func TestTableAndErrors(t *testing.T) {
	rs := []Result{{Name: "a", DonePerSec: 10}, {Name: "b", Baseline: "a", Instances: 2, DoneRatio: 0.5, Errors: 2, ErrorMsg: "2x boom"}}
	tab := Table(rs, "orders")
	for _, want := range []string{"orders/s", "| a | direct |", "| b | 2× lockproxy |", "**0.50×**", "**–**"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if e := Errors(rs); !strings.Contains(e, "b: 2 error(s)") || strings.Contains(e, "- a:") {
		t.Errorf("Errors = %q", e)
	}
	if Errors(rs[:1]) != "" {
		t.Error("Errors of error-free arms is not empty")
	}
}

func TestWhere(t *testing.T) {
	rs := []Result{
		{Name: "d"},
		{Name: "p", Instances: 2},
		{Name: "r", Via: "bare Go relay"},
	}
	for i, want := range []string{"direct", "2× lockproxy", "bare Go relay"} {
		if got := rs[i].Where(); got != want {
			t.Errorf("%s: Where = %q, want %q", rs[i].Name, got, want)
		}
	}
	tab, cpu := Table(rs, "tx"), CPUTable(rs, "tx")
	for _, s := range []string{tab, cpu} {
		if !strings.Contains(s, "| r | bare Go relay |") {
			t.Errorf("table lacks the relay arm's via:\n%s", s)
		}
	}
}
