package disjoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func TestCPUModel(t *testing.T) {
	direct := contend.Result{MysqldCPUUs: 40}
	tests := []struct {
		name    string
		proxied contend.Result
		want    float64
	}{
		{"proxy doubles the cost", contend.Result{MysqldCPUUs: 40, ProxyCPUUs: 30, RedisCPUUs: 10}, 0.5},
		{"free proxy", contend.Result{MysqldCPUUs: 40}, 1},
		{"no readings", contend.Result{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUModel(direct, tt.proxied); got != tt.want {
				t.Errorf("CPUModel = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTargetsAndReport(t *testing.T) {
	d := Data{Clients: 8, Rounds: 1, Seconds: 3, Instances: []int{1, 2}, Arms: []contend.Result{
		{Name: DirectName, MysqldCPUUs: 40, LostMax: 5},
		{Name: ProxyName(1), Baseline: DirectName, Instances: 1, DoneRatio: 0.4, MysqldCPUUs: 40, ProxyCPUUs: 40},
		{Name: ProxyName(2), Baseline: DirectName, Instances: 2, DoneRatio: 0.45, Errors: 1, ErrorMsg: "1x x"},
	}}
	d.Arms[1].Samples = done(1, 400)
	d.Arms = append(d.Arms,
		contend.Result{Name: NoRuleName, Baseline: DirectName, Instances: 1, DoneRatio: 0.7, Samples: done(1, 700)},
		contend.Result{Name: MemoryName, Baseline: DirectName, Instances: 1, DoneRatio: 0.6, Samples: done(1, 500)})
	tg := targets(d)
	if !tg[0].Met || tg[1].Met {
		t.Errorf("targets = %+v; want lost met (direct's own count ignored), errors missed", tg)
	}
	r := &results.Result{Scenario: "disjoint"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| " + ProxyName(1) + " | 40.0 | 40.0 | 0.0 | 0.50× | 0.40× |", "disjoint-ratio.png",
		"with no rule on the table (the relay's own cost: two hops, no analysis that finds a rule, no lock) **0.70×** direct",
		"so no lock service behind this relay can cost less) **0.60×** direct. The Redis arm of one instance reached 80% of the in-memory one and 57% of the relay's"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "disjoint-ratio.png")); err != nil {
		t.Error(err)
	}
}

// done is one round's sample of n operations a second.
func done(round, n int) []contend.Sample {
	return []contend.Sample{{Round: round, Run: contend.Run{Done: n, Seconds: 1}}}
}
