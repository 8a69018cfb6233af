package hotkey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestTargets(t *testing.T) {
	tests := []struct {
		name              string
		ratio, opt, vsApp float64
		jain              float64
		p50, p99          float64
		lost              int64
		met               []bool
	}{
		{"all met", 0.7, 1.2, 3.5, 0.99, 10, 30, 0, []bool{true, true, true, true, true, true}},
		{"slow, unfair, long tail, lost", 0.3, 0.8, 0.9, 0.5, 10, 41, 2, []bool{false, false, false, false, false, false}},
		{"exactly on the lines", 0.6, 1.0, 3.0, 0.95, 10, 40, 0, []bool{true, true, true, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Data{VsAppLock: tt.vsApp, Main: []contend.Result{
				{Name: ForUpdate}, {Name: ForUpdateRelay, Baseline: ForUpdate, Via: env.GoRelay, DoneRatio: 0.7, LostMax: 5},
				{Name: Proxy, Baseline: ForUpdate, Instances: 2, DoneRatio: tt.ratio, P50Ms: tt.p50, P99Ms: tt.p99, LostMax: tt.lost, Jain: tt.jain},
				{Name: Optimistic, Baseline: ForUpdate, Instances: 2, DoneRatio: tt.opt},
			}}
			ts := targets(d)
			if !strings.Contains(ts[0].Got, "(FOR UPDATE via bare Go relay: 0.70×)") {
				t.Errorf("throughput target does not name the relay floor: %q", ts[0].Got)
			}
			for i, tg := range ts {
				if tg.Met != tt.met[i] {
					t.Errorf("%s: met %v, want %v (got %s)", tg.Name, tg.Met, tt.met[i], tg.Got)
				}
			}
		})
	}
}

func TestReport(t *testing.T) {
	run := contend.Run{Clients: 8, Done: 80}
	d := Data{Clients: 64, Rounds: 1, Seconds: 3, VsAppLock: 2, Waiters: []int{8},
		Main: []contend.Result{
			{Name: ForUpdate, DonePerSec: 100, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 100, Seconds: 1}}}},
			{Name: ForUpdateRelay, Baseline: ForUpdate, Via: env.GoRelay, DonePerSec: 80, DoneRatio: 0.8, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 80, Seconds: 1}}}},
			{Name: Proxy, Baseline: ForUpdate, Instances: 2, DonePerSec: 50, DoneRatio: 0.5, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 50, Seconds: 1}}}},
			{Name: ProxyRelay, Baseline: ForUpdate, Via: env.LockingGoRelay, DonePerSec: 64, DoneRatio: 0.64, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 64, Seconds: 1}}}},
		},
		Fairness: []contend.Result{
			{Name: FairName(8, 0), Samples: []contend.Sample{{Run: run}}, Jain: 0.99, MaxOverMin: 1.1},
			{Name: FairName(8, 2), Baseline: FairName(8, 0), Instances: 2, Samples: []contend.Sample{{Run: run}}, Jain: 0.5},
		}}
	r := &results.Result{Scenario: "hotkey"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**2.00×**", "| 8 | 2× lockproxy |", "∞ (a client starved)", "0.990", "hotkey-throughput.png",
		"| " + ForUpdateRelay + " | bare Go relay | 80 | **0.80×** |", "It reached **0.80×** FOR UPDATE direct", "lockproxy against it (median of paired rounds): **0.62×**",
		"It reached **0.64×** FOR UPDATE direct: the floor for any proxy that locks rows outside the database", "lockproxy against it (median of paired rounds): **0.78×**"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "hotkey-throughput.png")); err != nil {
		t.Error(err)
	}
}

func TestCombineTargets(t *testing.T) {
	d := Data{Combine: []contend.Result{
		{Name: CondDirect, P99Ms: 10},
		{Name: CombinedLock, Baseline: CondDirect, Instances: 2, DoneRatio: 3.2, P99Ms: 9, Jain: 0.97},
		{Name: CombinedOptimistic, Baseline: CondDirect, Instances: 2, DoneRatio: 2.9, P99Ms: 11, Jain: 0.9},
	}}
	ts := combineTargets(d)
	want := []bool{true, true, true, false, false, false}
	if len(ts) != len(want) {
		t.Fatalf("%d targets, want %d", len(ts), len(want))
	}
	for i, tg := range ts {
		if tg.Met != want[i] {
			t.Errorf("%s: met %v, want %v (got %s)", tg.Name, tg.Met, want[i], tg.Got)
		}
	}
	if len(combineTargets(Data{})) != 0 || combineSection(Data{}) != "" {
		t.Error("results from before the combining arms gain targets or a section")
	}
}
