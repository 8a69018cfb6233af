package bank

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// targetRatio is the least transfers/s through lockproxy, as a share of
// the same transfers written with FOR UPDATE directly.
const targetRatio = 0.5

// targets: the plain-SELECT code through lockproxy keeps the total in
// every run, sees no error but 1205/1213, and through two instances
// reaches targetRatio of FOR UPDATE directly, in text and prepared form.
func targets(d Data) []results.Target {
	drift, errs := contend.ProxiedLosses(d.Arms)
	out := []results.Target{
		{Name: "drift of the total through lockproxy (worst run)", Want: "0", Got: fmt.Sprint(drift), Met: drift == 0},
		{Name: "errors through lockproxy", Want: "0", Got: fmt.Sprint(errs), Met: errs == 0},
	}
	for _, prepared := range []bool{false, true} {
		a, ok := contend.Find(d.Arms, ProxyName(2, prepared))
		if !ok {
			continue
		}
		out = append(out, results.Target{
			Name: fmt.Sprintf("transfers/s, 2 instances / %s", a.Baseline),
			Want: fmt.Sprintf("≥ %.2f×", targetRatio), Got: contend.X(a.DoneRatio), Met: a.DoneRatio >= targetRatio,
		})
	}
	return out
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d clients, %d accounts (rows of `sku_stock`, each starting with the same large balance). Each transfer picks two distinct random accounts, "+
		"reads both balances with one SELECT each, writes both back as absolute values with one UPDATE each and commits; a 1205 or 1213 is retried. "+
		"Through lockproxy the rule locks `write, locking_read, read_in_txn` (Redis backend), so the plain SELECTs take the rows' locks and are sent as current reads; "+
		"clients are spread over the instances. The FOR UPDATE arms are the same code written correctly for MariaDB alone. "+
		"*drift* is how far the sum of all balances moved in the run (lost updates show as drift). %.0f s per run, %d interleaved round(s); ratios are medians of per-round ratios against the arm's baseline.\n\n",
		d.Clients, d.Accounts, d.Seconds, d.Rounds)
	b.WriteString(contend.Table(d.Arms, "transfers"))
	b.WriteString(contend.Errors(d.Arms))
	b.WriteString("| arm | drift (worst run) | lock wait ms (mean) | lock hold ms (mean) |\n|---|--:|--:|--:|\n")
	for _, a := range d.Arms {
		wait, hold := "–", "–"
		if a.Instances > 0 {
			wait, hold = fmt.Sprintf("%.2f", a.LockWaitMs), fmt.Sprintf("%.2f", a.LockHoldMs)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", a.Name, a.LostMax, wait, hold)
	}
	b.WriteString("\n")
	b.WriteString(contend.CPUTable(d.Arms, "transfer"))
	name := "bank-ratio.png"
	var labels []string
	ratio := chart.Series{Name: "transfers/s / FOR UPDATE direct"}
	for _, a := range d.Arms {
		if a.Baseline != "" {
			labels = append(labels, a.Name)
			ratio.Values = append(ratio.Values, a.DoneRatio)
		}
	}
	err := chart.Bars(filepath.Join(plotDir, name), chart.Labels{Title: "bank transfers: throughput / the same code with FOR UPDATE directly", Y: "ratio"},
		labels, []chart.Series{ratio}, chart.Ref{Value: targetRatio, Label: "target"})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}
