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
		{Name: UnsafeRelayName(true), Baseline: AtomicName(true), Via: env.GoRelay, AttemptsRatio: 0.5, LostMax: 900},
		{Name: PairName(true), Baseline: AtomicName(true), DoneRatio: 0.82},
		{Name: PairRelayName(true), Baseline: AtomicName(true), Via: env.GoRelay, DoneRatio: 0.5,
			Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 500, Attempts: 500, Seconds: 1}}}},
		{Name: RewriteName(true), Baseline: AtomicName(true), Instances: 1, DoneRatio: 0.79, LostMax: 1,
			Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 790, Attempts: 800, Seconds: 1}}}},
	}}
	tg := targets(d)
	if len(tg) != 3 || !tg[0].Met || tg[1].Met || tg[2].Met || tg[2].Got != "1" {
		t.Errorf("targets = %+v; want text met, prepared (0.79) missed, 1 lost through lockproxy (direct and relay losses not counted)", tg)
	}
	if tg[0].Got != "0.85×" || tg[1].Got != "0.79× (the statements lockproxy sends, via bare Go relay: 0.50×)" {
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
		"- prepared: the two statements lockproxy sends", "reached **0.82×** of the atomic UPDATE sent directly, and **0.50×** through the bare Go relay",
		"the atomic UPDATE alone through the relay reached 0.90×", "lockproxy's rewrite reached **0.79×**, **1.58×** of the relay floor"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rewrite-ratio.png")); err != nil {
		t.Error(err)
	}
}
