package readwrite

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
)

func run(round int, arm, ps string, qps float64) Run {
	return Run{Round: round, Arm: arm, PSMode: ps, Stats: sysbench.Stats{QPS: qps, Queries: int(qps * 10)}, ProxyCPUSec: 1}
}

func TestTargetsAndReport(t *testing.T) {
	d := Data{Threads: 8, Seconds: 10, Rounds: 2, TableSize: 100, Runs: []Run{
		run(1, Direct, "disable", 1000), run(1, NoRules, "disable", 700), run(1, Locked, "disable", 400),
		run(2, Direct, "disable", 2000), run(2, NoRules, "disable", 1200), run(2, Locked, "disable", 1200),
		run(1, Direct, "auto", 1000), run(1, NoRules, "auto", 800), run(1, Locked, "auto", 600), run(1, Memory, "auto", 700),
	}}
	if got := Ratio(d, Locked, "disable"); got != 0.5 {
		t.Errorf("Ratio(text) = %v, want the median of 0.4 and 0.6", got)
	}
	tg := targets(d)
	if len(tg) != 2 || !tg[0].Met || !tg[1].Met {
		t.Fatalf("targets = %+v, want both met", tg)
	}
	if got := tg[1].Got; got != "0.60× (no rules: 0.80×, in-memory lock: 0.70×)" {
		t.Errorf("prepared target's figures = %q", got)
	}
	if got := tg[0].Got; got != "0.50× (no rules: 0.65×)" {
		t.Errorf("text target's figures = %q (a run without the in-memory arm)", got)
	}
	d.Runs[2].Stats.QPS = 100 // round 1 text: 0.1, median with 0.6 is 0.35
	if tg := targets(d); tg[0].Met {
		t.Errorf("text target met at %s", tg[0].Got)
	}
	r := &results.Result{}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	md, err := New().Report(r, t.TempDir(), "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| lockproxy, lock rule | text |", "| lockproxy, no rules | prepared |", "**0.80×**", "| lockproxy, lock rule, in-memory lock | prepared | 0 | 700 | **0.70×** |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
