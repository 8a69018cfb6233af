package flashsale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func arm(name, base string, n int, oversold, lost int64, errs int) contend.Result {
	return contend.Result{Name: name, Baseline: base, Instances: n, OversoldMax: oversold, LostMax: lost, Errors: errs,
		DonePerSec: 100, DoneRatio: 0.5, Samples: []contend.Sample{{Round: 1, Run: contend.Run{Done: 100}}}}
}

func TestTargets(t *testing.T) {
	tests := []struct {
		name string
		arms []contend.Result
		met  []bool
	}{
		{"correct", []contend.Result{arm(UnsafeText, ForUpdateText, 0, 0, 98, 0), arm(lockTxnName(false, 2), ForUpdateText, 2, 0, 0, 0)}, []bool{true, true, true}},
		{"direct mistakes do not count", []contend.Result{arm(UnsafeText, ForUpdateText, 0, 300, 98, 4)}, []bool{true, true, true}},
		{"proxy oversold", []contend.Result{arm(rewriteName(true, 1), ForUpdatePrepared, 1, 2, 0, 0)}, []bool{false, true, true}},
		{"proxy lost and errors", []contend.Result{arm(lockTxnName(true, 4), ForUpdatePrepared, 4, 0, 5, 1)}, []bool{true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := targets(Data{Arms: tt.arms})
			for i, tg := range got {
				if tg.Met != tt.met[i] {
					t.Errorf("target %q met = %v, want %v (got %s)", tg.Name, tg.Met, tt.met[i], tg.Got)
				}
			}
		})
	}
}

func TestReport(t *testing.T) {
	d := Data{Buyers: 400, Stock: 100, Rounds: 1, Instances: []int{1, 2}, Arms: []contend.Result{
		arm(ForUpdateText, "", 0, 0, 0, 0), arm(UnsafeText, ForUpdateText, 0, 0, 98, 0), arm(lockTxnName(false, 2), ForUpdateText, 2, 0, 0, 0),
	}}
	r := &results.Result{Scenario: "flashsale"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| unsafe txn, text | direct | 0 | 98 | 100 |", "lock rule: unsafe txn, text, ×2", "results/flashsale-ratio.png"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "flashsale-ratio.png")); err != nil {
		t.Error(err)
	}
	if got := short(lockTxnName(true, 2)); got != "lock ps, ×2" {
		t.Errorf("short = %q", got)
	}
}
