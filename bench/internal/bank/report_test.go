package bank

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestTargetsAndReport(t *testing.T) {
	d := Data{Clients: 8, Accounts: 8, Rounds: 1, Seconds: 3, Arms: []contend.Result{
		{Name: ForUpdateText},
		{Name: UnsafeText, Baseline: ForUpdateText, LostMax: 900},
		{Name: ProxyName(2, false), Baseline: ForUpdateText, Instances: 2, DoneRatio: 0.6, LockWaitMs: 1.5},
		{Name: ForUpdatePrepared},
		{Name: ProxyName(2, true), Baseline: ForUpdatePrepared, Instances: 2, DoneRatio: 0.4, LostMax: 3},
	}}
	tg := targets(d)
	if len(tg) != 4 || tg[0].Met || !tg[1].Met || !tg[2].Met || tg[3].Met {
		t.Errorf("targets = %+v; want drift missed (the direct arm's own ignored), errors met, text ratio met, prepared ratio missed", tg)
	}
	r := &results.Result{Scenario: "bank"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| " + ProxyName(2, false) + " | 0 | 1.50 |", "| " + UnsafeText + " | 900 | – |", "bank-ratio.png"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bank-ratio.png")); err != nil {
		t.Error(err)
	}
}
