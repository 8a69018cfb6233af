package invariant

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/soak/workload"
)

// Check is one invariant: its name, the value it was judged on (safe for
// one Markdown table cell) and whether it held.
type Check struct {
	Name  string
	Value string
	OK    bool
}

// Input is what the invariants are judged on.
type Input struct {
	State      workload.State    // the tables at the end
	Tally      *workload.Tally   // what the clients did
	MinStock   int64             // lowest stock seen while running
	Drained    bool              // both idle snapshots were taken with the gauges at 0
	IdleEnd    []sampling.Sample // the idle end reading, one per instance
	Counters   []sampling.CounterRow
	Alive      int // instances still running at the end
	Instances  int
	ScrapeErrs int
	ScrapeErr  error // the last failure, if any
	Unexpected int64 // client errors other than workload.ExpectedErrors
}

// Judge returns the run's correctness checks, in report order.
func Judge(in Input) []Check {
	st := in.State
	var supplied, orders, stock, oversold, lost int64
	for k := int64(1); k <= workload.HotSKUs; k++ {
		sup := workload.InitialStock + st.Restocked[k]
		supplied += sup
		orders += st.Orders[k]
		stock += st.Stock[k]
		if o := st.Orders[k] - sup; o > 0 {
			oversold += o
		}
		if d := sup - st.Stock[k] - st.Orders[k]; d != 0 {
			lost += abs(d)
		}
	}
	minSeen := min(in.MinStock, st.MinStock)
	held, waiters, conns := 0.0, 0.0, 0.0
	for _, s := range in.IdleEnd {
		held += s.Gauges["lockproxy_locks_held"]
		waiters += s.Gauges["lockproxy_lock_waiters"]
		conns += s.Gauges["lockproxy_client_connections"]
	}
	incr := in.Tally.Increments()
	stmts, _, _ := in.Tally.Snapshot()
	var abandoned int64
	for k, v := range stmts {
		if strings.HasPrefix(k, "abandoned txn") {
			abandoned += v
		}
	}
	slow := in.Tally.SlowReleases()
	maxRel := in.Tally.MaxRelease()
	replica := sampling.CounterTotal(in.Counters, `lockproxy_queries_total{route="replica",kind="query"}`) +
		sampling.CounterTotal(in.Counters, `lockproxy_queries_total{route="replica",kind="execute"}`)
	applied := sampling.CounterTotal(in.Counters, `lockproxy_rewrites_total{result="applied"}`)
	return []Check{
		{"unexpected client errors (any but 1205, 1213)", fmt.Sprint(in.Unexpected), in.Unexpected == 0},
		{"stock never negative", fmt.Sprintf("lowest stock seen %d", minSeen), minSeen >= 0},
		{"oversold units (orders beyond the stock supplied)", fmt.Sprintf("%d (supplied %d, orders %d)", oversold, supplied, orders), oversold == 0},
		{"sold units == order rows (lost stock updates)", fmt.Sprintf("sold %d, orders %d, lost %d", supplied-stock, orders, lost), lost == 0},
		{"rewrite counter == successful increments (lost updates)", fmt.Sprintf("counter %d, increments %d", st.CounterSum, incr), st.CounterSum == incr},
		{"rewrite rule applied", fmt.Sprintf("%.0f rewrites applied in the measured run", applied), applied > 0},
		{"reads routed to the replica", fmt.Sprintf("%.0f statements in the measured run", replica), replica > 0},
		{"abandoned transactions rolled back", fmt.Sprintf("sku %d stock %d (want %d)", workload.AbandonSKU, st.Abandoned, workload.AbandonStock), st.Abandoned == workload.AbandonStock},
		{fmt.Sprintf("abandoned locks free within %s", workload.ReleaseBound), fmt.Sprintf("%d abandoned, %d late, slowest %s", abandoned, slow, maxRel.Round(time.Millisecond)), slow == 0 && abandoned > 0},
		{"no lock held, waited for or client connected at the end", fmt.Sprintf("held %.0f, waiters %.0f, connections %.0f", held, waiters, conns), in.Drained && held == 0 && waiters == 0 && conns == 0},
		{"instances alive at the end", fmt.Sprintf("%d of %d", in.Alive, in.Instances), in.Alive == in.Instances},
		{"/metrics scrapes failed", scrapeText(in.ScrapeErrs, in.ScrapeErr), in.ScrapeErrs == 0},
	}
}

// scrapeText is the count of failed scrapes and the last failure.
func scrapeText(n int, err error) string {
	if n == 0 || err == nil {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (last: %s)", n, cell(err.Error()))
}

// cell makes s safe for one Markdown table cell (one line, no |, at most
// 120 bytes), as the report does with the cells it writes itself.
func cell(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
