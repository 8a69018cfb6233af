package rewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestTargetsAndReport(t *testing.T) {
	d := Data{Clients: 64, Rounds: 1, Seconds: 3, Protos: []string{"text", "prepared"}, Arms: []contend.Result{
		{Name: AtomicName(false), DonePerSec: 1000},
		{Name: RewriteName(false), Baseline: AtomicName(false), Instances: 1, DoneRatio: 0.85},
		{Name: UnsafeName(false), Baseline: AtomicName(false), DoneRatio: 0.2, LostMax: 1800},
		{Name: AtomicName(true), DonePerSec: 1000, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 1000, Attempts: 1000, Seconds: 1}}}},
		{Name: AtomicRelayName(true), Baseline: AtomicName(true), Via: env.GoRelay, DoneRatio: 0.9},
		{Name: UnsafeRelayName(true), Baseline: AtomicName(true), Via: env.GoRelay, AttemptsRatio: 0.5, LostMax: 900,
			Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 300, Attempts: 500, Seconds: 1}}}},
		{Name: RewriteName(true), Baseline: AtomicName(true), Instances: 1, DoneRatio: 0.79, LostMax: 1,
			Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 790, Attempts: 800, Seconds: 1}}}},
	}}
	tg := targets(d)
	if len(tg) != 3 || !tg[0].Met || tg[1].Met || tg[2].Met || tg[2].Got != "1" {
		t.Errorf("targets = %+v; want text met, prepared (0.79) missed, 1 lost through lockproxy (direct and relay losses not counted)", tg)
	}
	if tg[0].Got != "0.85×" || tg[1].Got != "0.79× (two statements via bare Go relay: 0.50× in attempts/s)" {
		t.Errorf("target figures %q, %q: only the protocol with relay arms names the floor", tg[0].Got, tg[1].Got)
	}
	r := &results.Result{Scenario: "rewrite"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**0.85×**", "| " + UnsafeName(false) + " | 1800 |", "rewrite-ratio.png",
		"| " + UnsafeRelayName(true) + " | bare Go relay |",
		"- prepared: through the bare Go relay the atomic UPDATE reached **0.90×**", "the unsafe read-then-write **0.50×** in attempts/s",
		"lockproxy's rewrite reached **0.79×** in decrements/s, **1.60×** of the two statements through the relay"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rewrite-ratio.png")); err != nil {
		t.Error(err)
	}
}
