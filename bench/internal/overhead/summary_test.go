package overhead

import (
	"math"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
)

func run(round int, target string, qps, avgMs float64, events, queries int, proxyCPU float64) Measure {
	return Measure{Round: round, Target: target, ProxyCPUSec: proxyCPU,
		Stats: sysbench.Stats{QPS: qps, AvgMs: avgMs, Events: events, Queries: queries}}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name      string
		runs      []Measure
		ratio     float64
		addedUs   float64
		directQPS float64
	}{
		{
			name: "paired ratios, median of three",
			runs: []Measure{
				run(1, Direct, 1000, 1.0, 1000, 1000, 0), run(1, Proxy, 500, 2.0, 500, 500, 0.05),
				run(2, Proxy, 900, 1.1, 900, 900, 0.05), run(2, Direct, 1000, 1.0, 1000, 1000, 0),
				run(3, Direct, 100, 10, 100, 100, 0), run(3, Proxy, 80, 12, 80, 80, 0.01),
			},
			ratio: 0.8, addedUs: 1000, directQPS: 1000,
		},
		{
			name: "per query for multi-statement transactions",
			runs: []Measure{
				run(1, Direct, 2000, 10, 100, 2000, 0), run(1, Proxy, 1000, 12, 50, 1000, 0.1),
			},
			ratio: 0.5, addedUs: 100, directQPS: 2000,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Cell{Config: Config{Test: "oltp_point_select", Threads: 1, PSMode: "auto"}, Runs: tt.runs}
			c.summarize()
			if math.Abs(c.Ratio-tt.ratio) > 1e-9 {
				t.Errorf("Ratio = %v, want %v", c.Ratio, tt.ratio)
			}
			if math.Abs(c.AddedUs-tt.addedUs) > 1e-6 {
				t.Errorf("AddedUs = %v, want %v", c.AddedUs, tt.addedUs)
			}
			if c.Direct.QPS != tt.directQPS {
				t.Errorf("Direct.QPS = %v, want %v", c.Direct.QPS, tt.directQPS)
			}
			if c.Proxy.ProxyCPUUs <= 0 {
				t.Errorf("Proxy.ProxyCPUUs = %v, want > 0", c.Proxy.ProxyCPUUs)
			}
		})
	}
}

func TestTargets(t *testing.T) {
	cells := []Cell{
		{Config: Config{Test: "oltp_point_select", Threads: 1, PSMode: "auto"}, AddedUs: 61},
		{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "auto"}, Ratio: 0.51},
		{Config: Config{Test: "oltp_point_select", Threads: 32, PSMode: "auto"}, Ratio: 0.1},
	}
	got := targets(cells)
	if len(got) != 2 {
		t.Fatalf("targets = %+v, want one per 1- and 8-thread cell", got)
	}
	if got[0].Met || !strings.Contains(got[0].Name, "1t") {
		t.Errorf("61 µs added must miss the 60 µs target: %+v", got[0])
	}
	if !got[1].Met || !strings.Contains(got[1].Name, "8t") {
		t.Errorf("0.51 must meet the 0.50 target: %+v", got[1])
	}
}

func TestPlans(t *testing.T) {
	quick, full := planFor(scenario.Options{Quick: true}), planFor(scenario.Options{})
	if len(quick.configs()) >= len(full.configs()) || quick.rounds >= full.rounds {
		t.Fatalf("quick plan must be smaller: quick %+v, full %+v", quick, full)
	}
	for _, c := range quick.configs() {
		if c.Test != "oltp_point_select" {
			t.Errorf("quick mode runs %s", c.Test)
		}
	}
	// Full mode: the whole matrix, five targets each (direct, lockproxy
	// without and with multiplexing, two relays) and two more for point
	// selects at 1 and 8 threads (the replica route), under ~23 minutes of
	// sysbench time.
	if n := len(full.configs()); n != 12 {
		t.Fatalf("full configs = %d, want 2 tests x 3 thread counts x 2 ps modes", n)
	}
	secs, replica := 0, 0
	for _, c := range full.configs() {
		secs += len(targetsOf(c)) * full.rounds * full.seconds
		if replicaArm(c) {
			replica++
			if c.Test != "oltp_point_select" || c.Threads == 32 {
				t.Errorf("replica arm for %s", c.Label())
			}
		}
	}
	if secs > 1400 || replica != 4 {
		t.Fatalf("full plan is %d s of sysbench, %d configurations with the replica route (want 4)", secs, replica)
	}
	for _, c := range quick.configs() {
		if !replicaArm(c) {
			t.Errorf("quick mode measures %s without the replica route", c.Label())
		}
	}
}

func TestFailedRunsAreCountedNotAveraged(t *testing.T) {
	c := Cell{Config: Config{Test: "oltp_read_write", Threads: 8, PSMode: "disable"}, Runs: []Measure{
		run(1, Direct, 1000, 1, 100, 1000, 0), run(1, Proxy, 800, 1.2, 80, 800, 0.01),
		run(2, Direct, 1000, 1, 100, 1000, 0), {Round: 2, Target: Proxy, Failed: true, Error: "FATAL: lost connection"},
	}}
	c.summarize()
	if c.Proxy.Failed != 1 || c.Direct.Failed != 0 {
		t.Fatalf("failed counts = %d/%d, want 0/1", c.Direct.Failed, c.Proxy.Failed)
	}
	if c.Ratio != 0.8 || c.Proxy.QPS != 800 {
		t.Fatalf("ratio %v, proxy qps %v: the failed run must not count", c.Ratio, c.Proxy.QPS)
	}
	ts := targets([]Cell{c})
	if len(ts) != 1 || ts[0].Met || !strings.Contains(ts[0].Got, "1 of 2 proxied runs failed") {
		t.Fatalf("targets = %+v: a cell with a failed proxied run cannot meet its target", ts)
	}
}

func TestFirstFatalAndPanicLine(t *testing.T) {
	out := "sysbench 1.0.20\nThreads started!\nFATAL: mysql_drv_query() returned error 2013\nFATAL: other\n"
	if got := firstFatal(out); got != "FATAL: mysql_drv_query() returned error 2013" {
		t.Errorf("firstFatal = %q", got)
	}
	log := "WARN x\npanic: sync: WaitGroup is reused\n\ngoroutine 1"
	if got := panicLine(log); got != "panic: sync: WaitGroup is reused" {
		t.Errorf("panicLine = %q", got)
	}
	if got := panicLine("all fine"); got != "no panic in its log" {
		t.Errorf("panicLine = %q", got)
	}
}

func TestRoundOrder(t *testing.T) {
	a, b := roundOrder(1, 0, targetOrder), roundOrder(1, 1, targetOrder)
	if strings.Join(a, ",") != "direct,proxy,proxy_mux,go_relay,socat" || strings.Join(b, ",") != "socat,go_relay,proxy_mux,proxy,direct" {
		t.Fatalf("roundOrder = %v then %v; want every target, reversed for the next configuration", a, b)
	}
	if strings.Join(roundOrder(2, 1, targetOrder), ",") != strings.Join(a, ",") {
		t.Fatal("the order must alternate with the round too")
	}
	if targetOrder[0] != Direct {
		t.Fatal("roundOrder changed targetOrder")
	}
	ps := Config{Test: "oltp_point_select", Threads: 8, PSMode: "auto"}
	if got := strings.Join(roundOrder(1, 1, targetsOf(ps)), ","); got != "proxy_replica,replica_direct,socat,go_relay,proxy_mux,proxy,direct" {
		t.Fatalf("point select order = %s", got)
	}
	if strings.Join(targetOrder, ",") != "direct,proxy,proxy_mux,go_relay,socat" {
		t.Fatal("targetsOf changed targetOrder")
	}
}

func TestParseRoutes(t *testing.T) {
	text := "# HELP lockproxy_queries_total x\n# TYPE lockproxy_queries_total counter\n" +
		`lockproxy_queries_total{kind="execute",route="replica"} 1200` + "\n" +
		`lockproxy_queries_total{kind="query",route="replica"} 30` + "\n" +
		`lockproxy_queries_total{kind="query",route="primary"} 7` + "\n" +
		`lockproxy_queries_totalx{route="replica"} 99` + "\n" +
		`lockproxy_statements_rejected_total{reason="x"} 5` + "\n"
	r, err := parseRoutes(text)
	if err != nil || r.replica != 1230 || r.primary != 7 {
		t.Fatalf("parseRoutes = %+v, %v; want replica 1230, primary 7", r, err)
	}
	if _, err := parseRoutes(`lockproxy_queries_total{route="replica"} x` + "\n"); err == nil {
		t.Fatal("want an error for a value that is not a number")
	}
}

// TestReplicaRoute: the replica route's figures pair replica runs with
// replica runs, its targets compare them with the primary route's, and a
// run whose statements went to the primary cannot meet them.
func TestReplicaRoute(t *testing.T) {
	var runs []Measure
	for round := 1; round <= 3; round++ {
		runs = append(runs, relayRuns(round, [2]float64{5000, 200}, [2]float64{6000, 150}, [2]float64{6000, 150})...)
		rd := run(round, ReplicaDirect, 8000, 0.125, 8000, 8000, 0)
		pr := run(round, ProxyReplica, 3600+float64(round)*200, 0.25, 4000, 4000, 0.04)
		pr.RoutedReplica, pr.RoutedPrimary = 4000, 0
		runs = append(runs, rd, pr)
	}
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "disable"}, Runs: runs}
	c.summarize()
	near := func(name string, got, want float64) { t.Helper(); wantNear(t, name, got, want) }
	near("Ratio", c.Ratio, 0.5)
	near("ReplicaRatio", c.ReplicaRatio, 0.5) // median of 3800, 4000, 4200 over 8000
	near("ReplicaAddedUs", c.ReplicaAddedUs, 125)
	near("ReplicaVsPrimary", c.ReplicaVsPrimary, 1)
	near("ProxyReplica.ReplicaShare", c.ProxyReplica.ReplicaShare, 1)
	near("ProxyReplica.ProxyCPUUs", c.ProxyReplica.ProxyCPUUs, 10)
	var rt []results.Target
	for _, x := range targets([]Cell{c}) {
		if strings.Contains(x.Name, "replica-routed") {
			rt = append(rt, x)
		}
	}
	if len(rt) != 1 || !rt[0].Met || !strings.Contains(rt[0].Got, "100.0% of statements on the replica") {
		t.Fatalf("replica targets = %+v", rt)
	}
	leaked := c
	leaked.Runs = append([]Measure(nil), c.Runs...)
	for i := range leaked.Runs {
		if leaked.Runs[i].Target == ProxyReplica {
			leaked.Runs[i].RoutedReplica, leaked.Runs[i].RoutedPrimary = 3000, 1000
		}
	}
	leaked.summarize()
	if ts := replicaTargetsOf(leaked); len(ts) != 1 || ts[0].Met {
		t.Fatalf("targets = %+v: point selects served by the primary cannot show the replica route's cost", ts)
	}
	slow := c
	slow.Ratio = 0.6 // 0.5 / 0.6 < 0.90
	slow.ReplicaVsPrimary = slow.ReplicaRatio / slow.Ratio
	if ts := replicaTargetsOf(slow); ts[0].Met {
		t.Fatalf("targets = %+v: a replica route 17%% dearer than the primary's misses", ts)
	}
	one := c
	one.Threads, one.ReplicaAddedUs = 1, 61
	if ts := replicaTargetsOf(one); len(ts) != 1 || ts[0].Met || !strings.Contains(ts[0].Name, "added latency") {
		t.Fatalf("targets = %+v: 61 µs added on the replica route misses", ts)
	}
	plain := Cell{Config: c.Config, Runs: relayRuns(1, [2]float64{5000, 200}, [2]float64{6000, 150}, [2]float64{6000, 150})}
	plain.summarize()
	if plain.HasReplica() || replicaTargetsOf(plain) != nil {
		t.Fatal("a cell without replica runs (results stored before the arm) has no replica targets")
	}
}

// relayRuns is one round of all four targets: direct at 10,000 qps and
// 100 µs, and the others as given (qps, avg µs).
func relayRuns(round int, proxy, goRelay, socat [2]float64) []Measure {
	m := func(target string, qps, avgUs float64) Measure {
		ms := run(round, target, qps, avgUs/1000, int(qps), int(qps), 0)
		if target == GoRelay || target == Socat {
			ms.RelayCPUSec = qps * 5e-6 // 5 µs per query
		}
		return ms
	}
	return []Measure{m(Direct, 10000, 100), m(Proxy, proxy[0], proxy[1]), m(GoRelay, goRelay[0], goRelay[1]), m(Socat, socat[0], socat[1])}
}

func TestSummarizeRelays(t *testing.T) {
	var runs []Measure
	runs = append(runs, relayRuns(1, [2]float64{5000, 200}, [2]float64{5000, 190}, [2]float64{4000, 250})...)
	runs = append(runs, relayRuns(2, [2]float64{4500, 210}, [2]float64{5000, 180}, [2]float64{5000, 150})...)
	runs = append(runs, relayRuns(3, [2]float64{6000, 160}, [2]float64{5000, 200}, [2]float64{6000, 170})...)
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "disable"}, Runs: runs}
	c.summarize()
	near := func(name string, got, want float64) { t.Helper(); wantNear(t, name, got, want) }
	near("Ratio", c.Ratio, 0.5)
	near("GoRelayRatio", c.GoRelayRatio, 0.5)
	near("SocatRatio", c.SocatRatio, 0.5)
	near("ProxyVsGoRelay", c.ProxyVsGoRelay, 1.0) // median of 1.0, 0.9, 1.2
	near("GoRelayAddedUs", c.GoRelayAddedUs, 90)  // median 190 − 100
	near("SocatAddedUs", c.SocatAddedUs, 70)      // median 170 − 100
	near("ProxyOverGoRelayUs", c.ProxyOverGoRelayUs, 10)
	near("GoRelay.RelayCPUUs", c.GoRelay.RelayCPUUs, 5)
	if c.Proxy.RelayCPUUs != 0 || !c.HasRelays() {
		t.Errorf("proxy relay CPU %v, HasRelays %v", c.Proxy.RelayCPUUs, c.HasRelays())
	}
	ts := targets([]Cell{c})
	if len(ts) != 2 || !strings.Contains(ts[0].Got, "bare Go relay: 0.50; lockproxy / relay 1.00") || !ts[0].Met {
		t.Fatalf("targets = %+v: the 8-thread figure must name the relay's and meet 0.50", ts)
	}
	if !strings.Contains(ts[1].Name, "CPU per query") || !strings.Contains(ts[1].Got, "bare Go relay: 5.0 µs") {
		t.Fatalf("targets = %+v: the point select at 8 threads has a CPU target naming the relay's", ts)
	}
	auto := c
	auto.PSMode, auto.Ratio = "auto", 0.45
	if ts := targets([]Cell{c, auto}); len(ts) != 4 || !strings.Contains(ts[3].Name, "prepared ratio") || ts[3].Met {
		t.Fatalf("targets = %+v: a prepared ratio under the text ratio misses", ts)
	}
	c.Threads = 1
	ts = targets([]Cell{c})
	if len(ts) != 1 || !strings.Contains(ts[0].Got, "bare Go relay: 90.0 µs; lockproxy − relay +10.0 µs") {
		t.Fatalf("targets = %+v: the 1-thread figure must name the relay's", ts)
	}
}

// TestSocatMissingIsAFailureNotAGap: runs of a relay that could not start
// are failed runs with the reason, and the other figures stand.
func TestSocatMissingIsAFailureNotAGap(t *testing.T) {
	msg := "env: relay: socat is not installed (scripts/testbed.sh install installs it)"
	var runs []Measure
	for round := 1; round <= 2; round++ {
		rs := relayRuns(round, [2]float64{5000, 200}, [2]float64{5000, 190}, [2]float64{0, 0})
		rs[3] = Measure{Round: round, Target: Socat, Failed: true, Error: msg}
		runs = append(runs, rs...)
	}
	c := Cell{Config: Config{Test: "oltp_point_select", Threads: 8, PSMode: "auto"}, Runs: runs}
	c.summarize()
	if c.Socat.Failed != 2 || c.SocatRatio != 0 || c.SocatAddedUs != 0 || c.GoRelayRatio != 0.5 || c.Ratio != 0.5 {
		t.Fatalf("cell = %+v", c)
	}
	if ts := targets([]Cell{c}); !ts[0].Met || strings.Contains(ts[0].Got, "failed") {
		t.Fatalf("targets = %+v: a socat failure is not a lockproxy failure", ts)
	}
}

// wantNear fails t unless got is want to within rounding.
func wantNear(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}
