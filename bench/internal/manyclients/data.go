package manyclients

import (
	"fmt"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Modes of a run: lockproxy keeping one primary connection per client,
// or multiplexing the clients over a bounded pool.
const (
	Pinned      = "pinned"
	Multiplexed = "multiplexed"
)

// Run is one mode in one round: a fresh lockproxy, Clients connections
// opened (each running one point select), Busy of them looping for the
// round's seconds, every other one running one more statement at the
// end, all closed.
type Run struct {
	Round          int     `json:"round"`
	Mode           string  `json:"mode"`
	Clients        int     `json:"clients"`
	ConnectSeconds float64 `json:"connect_seconds"`
	// Ops are the busy clients' completed operations (a point select, or
	// a BEGIN; UPDATE; COMMIT transaction), OpsPerSec over the loop.
	Ops       int     `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Selects   int     `json:"selects"`
	Txns      int     `json:"txns"`
	// Errors are every client's errors, FirstError the first of them.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// BackendBase is MariaDB's Threads_connected before the clients
	// connected; BackendMax the most it read while they were open;
	// BackendPeak is the difference: the connections the clients cost.
	BackendBase int `json:"backend_base"`
	BackendMax  int `json:"backend_max"`
	BackendPeak int `json:"backend_peak"`
}

func (r Run) String() string {
	s := fmt.Sprintf("round %d %s: %d clients in %.1f s; %d ops (%.0f/s: %d selects, %d transactions); MariaDB saw at most %d connections more than before (%d → %d); %d errors",
		r.Round, r.Mode, r.Clients, r.ConnectSeconds, r.Ops, r.OpsPerSec, r.Selects, r.Txns, r.BackendPeak, r.BackendBase, r.BackendMax, r.Errors)
	if r.FirstError != "" {
		s += " (first: " + r.FirstError + ")"
	}
	return s
}

// Data is the scenario's result data.
type Data struct {
	Clients  int   `json:"clients"`
	Busy     int   `json:"busy"`
	Seconds  int   `json:"seconds"`
	PoolMax  int   `json:"pool_max_connections"`
	Runs     []Run `json:"runs"`
	Rounds   int   `json:"rounds"`
	Dialers  int   `json:"dialers"`
	KeyRange int   `json:"key_range"`
	// Summary: the worst multiplexed peak of backend connections, the
	// errors of each mode, and the median over rounds of the multiplexed
	// throughput over the pinned one of the same round.
	MuxPeak      int     `json:"mux_peak"`
	PinnedPeak   int     `json:"pinned_peak"`
	MuxErrors    int     `json:"mux_errors"`
	PinnedErrors int     `json:"pinned_errors"`
	Ratio        float64 `json:"mux_over_pinned"`
}

func (d *Data) summarize() {
	byRound := map[int]map[string]float64{}
	for _, r := range d.Runs {
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]float64{}
		}
		byRound[r.Round][r.Mode] = r.OpsPerSec
		switch r.Mode {
		case Multiplexed:
			d.MuxPeak, d.MuxErrors = max(d.MuxPeak, r.BackendPeak), d.MuxErrors+r.Errors
		case Pinned:
			d.PinnedPeak, d.PinnedErrors = max(d.PinnedPeak, r.BackendPeak), d.PinnedErrors+r.Errors
		}
	}
	var ratios []float64
	for _, m := range byRound {
		if m[Pinned] > 0 && m[Multiplexed] > 0 {
			ratios = append(ratios, m[Multiplexed]/m[Pinned])
		}
	}
	d.Ratio = results.Median(ratios)
}

// Targets (reported, not asserted).
const (
	// TargetRatio is the least the busy clients' throughput with
	// multiplexing may be of the pinned mode's.
	TargetRatio = 0.90
)

func (d Data) targets() []results.Target {
	return []results.Target{
		{Name: fmt.Sprintf("connections MariaDB sees for %d clients with multiplexing (most over the run, above the baseline)", d.Clients),
			Want: fmt.Sprintf("≤ %d", d.PoolMax), Got: fmt.Sprintf("%d (pinned: %d)", d.MuxPeak, d.PinnedPeak), Met: d.MuxPeak > 0 && d.MuxPeak <= d.PoolMax},
		{Name: "errors with multiplexing",
			Want: "0", Got: fmt.Sprintf("%d (pinned: %d)", d.MuxErrors, d.PinnedErrors), Met: d.MuxErrors == 0 && len(d.Runs) > 0},
		{Name: fmt.Sprintf("throughput of %d busy clients with multiplexing / pinned (median of rounds)", d.Busy),
			Want: fmt.Sprintf("≥ %.2f", TargetRatio), Got: fmt.Sprintf("%.2f", d.Ratio), Met: d.Ratio >= TargetRatio},
	}
}
