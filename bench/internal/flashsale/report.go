package flashsale

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// throughLockproxy is every arm that ran through lockproxy.
func throughLockproxy(arms []contend.Result) []contend.Result {
	var out []contend.Result
	for _, a := range arms {
		if a.Instances > 0 {
			out = append(out, a)
		}
	}
	return out
}

// targets: lockproxy makes the unsafe code correct, without errors.
func targets(d Data) []results.Target {
	var oversold, lost int64
	errs := 0
	for _, a := range throughLockproxy(d.Arms) {
		oversold, lost = max(oversold, a.OversoldMax), max(lost, a.LostMax)
		errs += a.Errors
	}
	return []results.Target{
		{Name: "oversold units through lockproxy (worst arm and round)", Want: "0", Got: fmt.Sprint(oversold), Met: oversold == 0},
		{Name: "lost updates through lockproxy (worst arm and round)", Want: "0", Got: fmt.Sprint(lost), Met: lost == 0},
		{Name: "buyers' errors other than 1205/1213 through lockproxy", Want: "0", Got: fmt.Sprint(errs), Met: errs == 0},
	}
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d buyers, each on its own connection, rush one sku with stock %d; each buys once (retrying 1205/1213 and rewrite conflicts) "+
		"or gives up on seeing stock 0. Every arm ran once per round, %d interleaved round(s) (order reversed every other round); "+
		"figures are medians over rounds and **ratios are medians of per-round ratios against the arm's direct baseline** "+
		"(FOR UPDATE directly on MariaDB, same protocol). *orders/s* = orders taken / time from the first buyer's start to the last buyer's end; "+
		"*attempts/s* = transactions (or read-then-write pairs, retried ones included, sold-out ones too) per second; "+
		"*p50/p99* per successful buy, from its first attempt to its commit. lockproxy instances: %v, Redis lock backend, ttl and wait_timeout 10 s.\n\n",
		d.Buyers, d.Stock, d.Rounds, d.Instances)
	b.WriteString(contend.Table(d.Arms, "orders"))
	b.WriteString("Correctness: units sold beyond the stock and updates lost (orders taken that the stock does not show), worst round; orders taken per round.\n\n")
	b.WriteString("| arm | via | oversold | lost updates | orders per round |\n|---|---|--:|--:|---|\n")
	for _, a := range d.Arms {
		var orders []string
		for _, s := range a.Samples {
			orders = append(orders, fmt.Sprint(int64(s.Run.Done)))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s |\n", a.Name, contend.Via(a.Instances), a.OversoldMax, a.LostMax, strings.Join(orders, ", "))
	}
	b.WriteString("\n")
	b.WriteString(contend.Errors(d.Arms))
	name := "flashsale-ratio.png"
	if err := chartRatios(filepath.Join(plotDir, name), d.Arms); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}

// chartRatios draws orders/s and tx/s against the FOR UPDATE baseline for
// every arm that has a baseline.
func chartRatios(path string, arms []contend.Result) error {
	var labels []string
	done, att := chart.Series{Name: "orders/s ratio"}, chart.Series{Name: "attempts/s ratio"}
	for _, a := range arms {
		if a.Baseline == "" {
			continue
		}
		labels = append(labels, short(a.Name))
		done.Values = append(done.Values, a.DoneRatio)
		att.Values = append(att.Values, a.AttemptsRatio)
	}
	return chart.Bars(path, chart.Labels{Title: "flash sale: throughput / SELECT ... FOR UPDATE directly (median of paired rounds)", Y: "ratio"},
		labels, []chart.Series{done, att}, chart.Ref{Value: 1, Label: "same as FOR UPDATE direct"})
}

func short(name string) string {
	r := strings.NewReplacer("lock rule: unsafe txn, ", "lock ", "rewrite rule: autocommit, ", "rewrite ",
		"app Redis lock + unsafe txn, text", "app lock", "unsafe txn, ", "unsafe direct ", "prepared", "ps")
	return r.Replace(name)
}
