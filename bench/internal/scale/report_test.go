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

// TestWindowedTargets: a run with the release-window arms has their
// not-falling targets too, by their own figures.
func TestWindowedTargets(t *testing.T) {
	d := Data{Keys: 1000, Clients: []int{8}, Instances: []int{1, 2}, Rounds: 1, Seconds: 3, Windowed: true, Arms: []contend.Result{
		{Name: DirectName(8), DonePerSec: 5000},
		{Name: ProxyName(8, 1), Baseline: DirectName(8), Instances: 1, DonePerSec: 2000},
		{Name: ProxyName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 1900},
		{Name: ReleaseWindowName(8, 1), Baseline: DirectName(8), Instances: 1, DonePerSec: 2100},
		{Name: ReleaseWindowName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 2200},
	}}
	tg := targets(d)
	if len(tg) != 4 {
		t.Fatalf("targets = %+v; want lost, errors, and one per arm kind", tg)
	}
	if tg[2].Met || !tg[3].Met || tg[3].Got != "2100 → 2200" || !strings.Contains(tg[3].Name, "release window "+ReleaseWindow) {
		t.Errorf("targets = %+v; want the plain arm missed (2000 → 1900) and the release-window arm met (2100 → 2200)", tg)
	}
}

// TestSharedTargets: the shared-cores series starts from the plain
// 1-instance arm and goes on with its own.
func TestSharedTargets(t *testing.T) {
	d := Data{Keys: 1000, Clients: []int{8}, Instances: []int{1, 2, 4}, Rounds: 1, Seconds: 3, Shared: true, Arms: []contend.Result{
		{Name: DirectName(8), DonePerSec: 5000},
		{Name: ProxyName(8, 1), Baseline: DirectName(8), Instances: 1, DonePerSec: 2000},
		{Name: ProxyName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 1900},
		{Name: ProxyName(8, 4), Baseline: DirectName(8), Instances: 4, DonePerSec: 1800},
		{Name: SharedName(8, 2), Baseline: DirectName(8), Instances: 2, DonePerSec: 2050},
		{Name: SharedName(8, 4), Baseline: DirectName(8), Instances: 4, DonePerSec: 2040},
	}}
	tg := targets(d)
	if len(tg) != 4 {
		t.Fatalf("targets = %+v; want lost, errors, and one per arm kind", tg)
	}
	if tg[2].Met || tg[3].Met || tg[3].Got != "2000 → 2050 → 2040" || !strings.Contains(tg[3].Name, "cores shared out") {
		t.Errorf("targets = %+v; want the plain arm missed (2000 → 1900 → 1800) and the shared one missed at 4 (2000 → 2050 → 2040)", tg)
	}
	d.Arms[5].DonePerSec = 2050
	if tg := targets(d); !tg[3].Met {
		t.Errorf("shared-cores target %+v missed at 2000 → 2050 → 2050", tg[3])
	}
}
