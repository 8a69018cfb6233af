package invariant

import (
	"errors"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/soak/workload"
)

func TestJudge(t *testing.T) {
	ok := workload.State{
		Stock:     map[int64]int64{1: 10, 2: 0, 3: 200, 4: 5},
		Orders:    map[int64]int64{1: 390, 2: 200, 3: 0, 4: 195},
		Restocked: map[int64]int64{1: 200},
		Abandoned: workload.AbandonStock, CounterSum: 42,
	}
	tl := workload.NewTally()
	for range 42 {
		tl.CountIncrement()
	}
	tl.Add("abandoned txn holding a row lock (TCP reset)", 3)
	idle := []sampling.Sample{{Gauges: map[string]float64{}}, {Gauges: map[string]float64{}}}
	counters := []sampling.CounterRow{
		{Name: `lockproxy_queries_total{route="replica",kind="query"}`, Delta: 10},
		{Name: `lockproxy_rewrites_total{result="applied"}`, Delta: 4},
	}
	in := Input{State: ok, Tally: tl, Drained: true, IdleEnd: idle, Counters: counters, Alive: 2, Instances: 2}
	for _, c := range Judge(in) {
		if !c.OK {
			t.Errorf("clean run: %s failed: %s", c.Name, c.Value)
		}
	}
	bad := in
	bad.State.Orders = map[int64]int64{1: 401, 2: 200, 3: 0, 4: 195} // one oversold, one lost
	bad.State.CounterSum = 41
	bad.MinStock = -1
	bad.Unexpected = 1
	bad.Alive = 1
	failed := map[string]bool{}
	for _, c := range Judge(bad) {
		if !c.OK {
			failed[c.Name] = true
		}
	}
	for _, name := range []string{
		"unexpected client errors (any but 1205, 1213)", "stock never negative",
		"oversold units (orders beyond the stock supplied)", "sold units == order rows (lost stock updates)",
		"rewrite counter == successful increments (lost updates)", "instances alive at the end",
	} {
		if !failed[name] {
			t.Errorf("broken run: %q did not fail", name)
		}
	}
}

func TestScrapeText(t *testing.T) {
	tests := []struct {
		n    int
		err  error
		want string
	}{
		{0, nil, "0"},
		{2, errors.New("metrics a|b:\nrefused"), `2 (last: metrics a\|b: refused)`},
	}
	for _, tt := range tests {
		if got := scrapeText(tt.n, tt.err); got != tt.want {
			t.Errorf("scrapeText(%d, %v) = %q, want %q", tt.n, tt.err, got, tt.want)
		}
	}
}
