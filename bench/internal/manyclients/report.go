package manyclients

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Report implements scenario.Scenario: what MariaDB saw, the errors and
// the busy clients' throughput in each mode, and every run.
func (s *Scenario) Report(r *results.Result, _, _ string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each round runs both modes, their order alternating from round to round, each on a fresh lockproxy (no rules, memory lock backend): "+
		"**multiplexed** (`backends.pool.multiplex: true`, `max_connections: %d`) and **pinned** (one primary connection per client). "+
		"%d client connections are opened through it (go-sql-driver/mysql with `interpolateParams=true`, %d at a time), each running an autocommit point select; "+
		"then %d of them loop for %d s, alternating an autocommit point select (`SELECT v FROM t WHERE id = ?`) and a short transaction "+
		"(`BEGIN; UPDATE t SET v = v + 1 WHERE id = ?; COMMIT`), keys uniform over %d rows; then every client runs one more statement and all close. "+
		"MariaDB's `Threads_connected` is read every 20 ms throughout; *seen* is its highest reading minus its reading before the clients connected. "+
		"*ratio* is the median over rounds of the multiplexed throughput over the pinned one of the same round.\n\n",
		d.PoolMax, d.Clients, d.Dialers, d.Busy, d.Seconds, d.KeyRange)
	fmt.Fprintf(&b, "| mode | connections MariaDB saw (worst round) | errors | ratio |\n|---|--:|--:|--:|\n")
	fmt.Fprintf(&b, "| multiplexed | **%d** | %d | **%.2f** |\n| pinned | %d | %d | 1 |\n\n", d.MuxPeak, d.MuxErrors, d.Ratio, d.PinnedPeak, d.PinnedErrors)
	b.WriteString("| round | mode | clients | open in s | ops/s | point selects | transactions | Threads_connected before → most | seen | errors | first error |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, run := range d.Runs {
		fmt.Fprintf(&b, "| %d | %s | %d | %.1f | %.0f | %d | %d | %d → %d | %d | %d | %s |\n",
			run.Round, run.Mode, run.Clients, run.ConnectSeconds, run.OpsPerSec, run.Selects, run.Txns,
			run.BackendBase, run.BackendMax, run.BackendPeak, run.Errors, cell(run.FirstError))
	}
	b.WriteString("\n")
	return b.String(), nil
}

// cell makes s safe in a table cell.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
