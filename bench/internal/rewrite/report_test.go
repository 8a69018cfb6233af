package rewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestTargetsAndReport(t *testing.T) {
	d := Data{Clients: 64, Rounds: 1, Seconds: 3, Protos: []string{"text", "prepared"}, Arms: []contend.Result{
		{Name: AtomicName(false), DonePerSec: 1000},
		{Name: RewriteName(false), Baseline: AtomicName(false), Instances: 1, DoneRatio: 0.85},
		{Name: UnsafeName(false), Baseline: AtomicName(false), DoneRatio: 0.2, LostMax: 1800},
		{Name: AtomicName(true), DonePerSec: 1000},
		{Name: RewriteName(true), Baseline: AtomicName(true), Instances: 1, DoneRatio: 0.79, LostMax: 1},
	}}
	tg := targets(d)
	if len(tg) != 3 || !tg[0].Met || tg[1].Met || tg[2].Met || tg[2].Got != "1" {
		t.Errorf("targets = %+v; want text met, prepared (0.79) missed, 1 lost through lockproxy (direct losses not counted)", tg)
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
	for _, want := range []string{"**0.85×**", "| " + UnsafeName(false) + " | 1800 |", "rewrite-ratio.png"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rewrite-ratio.png")); err != nil {
		t.Error(err)
	}
}
