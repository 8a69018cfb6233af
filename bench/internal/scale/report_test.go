package scale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestTargetsAndReport(t *testing.T) {
	d := Data{Keys: 1000, Clients: []int{8, 64}, Instances: []int{1, 2}, Rounds: 1, Seconds: 3, Arms: []contend.Result{
		{Name: DirectName(8), DonePerSec: 5000, LostMax: 3},
		{Name: ProxyName(8, 1), Baseline: DirectName(8), Instances: 1, DonePerSec: 2000, DoneRatio: 0.4},
		{Name: ProxyName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 2100, DoneRatio: 0.42},
		{Name: DirectName(64), DonePerSec: 6000},
		{Name: ProxyName(64, 1), Baseline: DirectName(64), Instances: 1, DonePerSec: 2500, DoneRatio: 0.41},
		{Name: ProxyName(64, 2), Baseline: DirectName(64), Instances: 2, DonePerSec: 2400, DoneRatio: 0.4, Errors: 1, ErrorMsg: "1x x"},
	}}
	tg := targets(d)
	if len(tg) != 4 {
		t.Fatalf("targets = %+v; want lost, errors and one per client count", tg)
	}
	if !tg[0].Met || tg[1].Met || !tg[2].Met || tg[3].Met {
		t.Errorf("targets = %+v; want lost met (direct's own count ignored), errors missed, 8 clients met, 64 clients missed (2500 → 2400)", tg)
	}
	if tg[3].Got != "2500 → 2400" {
		t.Errorf("64 clients target got %q", tg[3].Got)
	}
	r := &results.Result{Scenario: "scale"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| " + ProxyName(64, 2) + " |", "from 1000 rows", "scale-throughput.png"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "scale-throughput.png")); err != nil {
		t.Error(err)
	}
}

// TestSeriesTargets: a run with the release-window or the shared-cores
// arms has their not-falling targets too, by their own figures; the
// shared-cores series starts from the plain 1-instance arm.
func TestSeriesTargets(t *testing.T) {
	plain := []contend.Result{
		{Name: DirectName(8), DonePerSec: 5000},
		{Name: ProxyName(8, 1), Baseline: DirectName(8), Instances: 1, DonePerSec: 2000},
		{Name: ProxyName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 1900},
	}
	for _, tc := range []struct {
		name string
		d    Data
		arms []contend.Result
		got  string // the series' figures
		met  bool
	}{
		{"release window", Data{Windowed: true}, []contend.Result{
			{Name: ReleaseWindowName(8, 1), Instances: 1, DonePerSec: 2100},
			{Name: ReleaseWindowName(8, 2), Instances: 2, DonePerSec: 2200}}, "2100 → 2200", true},
		{"cores shared out", Data{Shared: true}, []contend.Result{
			{Name: SharedName(8, 2), Instances: 2, DonePerSec: 2050}}, "2000 → 2050", true},
		{"cores shared out", Data{Shared: true}, []contend.Result{
			{Name: SharedName(8, 2), Instances: 2, DonePerSec: 1990}}, "2000 → 1990", false},
	} {
		d := tc.d
		d.Keys, d.Clients, d.Instances, d.Rounds, d.Seconds = 1000, []int{8}, []int{1, 2}, 1, 3
		d.Arms = append(append([]contend.Result(nil), plain...), tc.arms...)
		tg := targets(d)
		if len(tg) != 4 {
			t.Fatalf("%s: targets = %+v; want lost, errors, and one per arm kind", tc.name, tg)
		}
		if tg[2].Met || tg[2].Got != "2000 → 1900" {
			t.Errorf("%s: plain series %+v, want missed at 2000 → 1900", tc.name, tg[2])
		}
		if tg[3].Met != tc.met || tg[3].Got != tc.got || !strings.Contains(tg[3].Name, tc.name) {
			t.Errorf("%s: series %+v, want %s met=%v", tc.name, tg[3], tc.got, tc.met)
		}
	}
}
