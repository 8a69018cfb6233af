package overhead

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func report(t *testing.T, d Data) (string, string) {
	t.Helper()
	r := &results.Result{Scenario: "overhead"}
	if err := r.SetData(d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	md, err := New().Report(r, dir, "results")
	if err != nil {
		t.Fatal(err)
	}
	return md, dir
}

func TestReportRelays(t *testing.T) {
	msg := "env: relay: socat is not installed (scripts/testbed.sh install installs it)"
	runs := relayRuns(1, [2]float64{5000, 200}, [2]float64{4000, 190}, [2]float64{0, 0})
	runs[3] = Measure{Round: 1, Target: Socat, Failed: true, Error: msg}
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "disable"}, Runs: runs}
	c.summarize()
	md, dir := report(t, Data{Rounds: 1, Seconds: 2, Tables: 4, TableSize: 10000, Cells: []Cell{c}})
	for _, want := range []string{
		"**The floor on this host**",
		"- point_select/8t/ps=disable: qps / direct: bare Go relay **0.40**, socat failed, lockproxy **0.50** = **1.25× the bare Go relay**",
		"lockproxy − Go relay: **+10.0 µs**",
		"| point_select | 8 | disable | 4000 (4000–4000) | **0.40** | **90.0** | failed | failed | failed | **1.25×** | **+10.0 µs** |",
		"| 0 / 1 |", // failed runs Go relay / socat
		"`" + msg + "` — point_select/8t/ps=disable socat round 1", // the reason, not a silent gap
		"Go relay: sysbench + mysqld + relay = total",
		"overhead-floor.png",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, png := range []string{"overhead-ratio.png", "overhead-qps.png", "overhead-floor.png"} {
		if _, err := os.Stat(filepath.Join(dir, png)); err != nil {
			t.Error(err)
		}
	}
}

// TestReportWithoutRelays renders results stored before the relay arms
// existed: no relay sections, no floor chart.
func TestReportWithoutRelays(t *testing.T) {
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 1, PSMode: "auto"}, Runs: []Measure{
		run(1, Direct, 1000, 1.0, 1000, 1000, 0), run(1, Proxy, 500, 2.0, 500, 500, 0.05),
	}}
	c.summarize()
	md, dir := report(t, Data{Rounds: 1, Seconds: 2, Tables: 4, TableSize: 10000, Cells: []Cell{c}})
	for _, not := range []string{"floor", "Go relay", "socat"} {
		if strings.Contains(md, not) {
			t.Errorf("report without relay runs mentions %q:\n%s", not, md)
		}
	}
	if !strings.Contains(md, "| point_select | 1 | auto |") {
		t.Errorf("report lacks the main row:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "overhead-floor.png")); err == nil {
		t.Error("floor chart drawn without relay runs")
	}
}

func TestReportReplicaRoute(t *testing.T) {
	runs := relayRuns(1, [2]float64{5000, 200}, [2]float64{6000, 150}, [2]float64{6000, 150})
	rd := run(1, ReplicaDirect, 8000, 0.125, 8000, 8000, 0)
	pr := run(1, ProxyReplica, 4000, 0.25, 4000, 4000, 0.04)
	pr.RoutedReplica = 4000
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "disable"}, Runs: append(runs, rd, pr)}
	c.summarize()
	md, _ := report(t, Data{Rounds: 1, Seconds: 2, Tables: 4, TableSize: 10000, Cells: []Cell{c}})
	want := "| point_select | 8 | disable | 8000 (8000–8000) | 4000 (4000–4000) | **0.50** | **125.0** | 0.50 / 100.0 | **1.00** | 100.0% | 10.0 / 0.0 | 0 / 0 |"
	if !strings.Contains(md, "**The replica route**") || !strings.Contains(md, want) {
		t.Errorf("report lacks the replica route's row %q:\n%s", want, md)
	}
	if md, _ = report(t, Data{Rounds: 1, Cells: []Cell{{Config: c.Config, Runs: runs}}}); strings.Contains(md, "replica route") {
		t.Errorf("report without replica runs has a replica section:\n%s", md)
	}
}
