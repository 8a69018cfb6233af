package hotkey

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func targets(d Data) []results.Target {
	p, _ := contend.Find(d.Main, Proxy)
	floor := ""
	if fr, ok := contend.Find(d.Main, ForUpdateRelay); ok {
		floor = fmt.Sprintf(" (FOR UPDATE via bare Go relay: %s", contend.X(fr.DoneRatio))
		if lr, ok := contend.Find(d.Main, ProxyRelay); ok {
			floor += fmt.Sprintf("; in-memory lock at the SELECT via bare Go relay: %s", contend.X(lr.DoneRatio))
		}
		floor += ")"
	}
	// The lock rule's target holds in every round: its lowest round's
	// ratio is what is compared.
	lowest := p.DoneRatio
	byRound := ""
	if base, ok := contend.Find(d.Main, p.Baseline); ok {
		if rs := contend.RoundRatios(p, base, contend.Run.DonePerSec); len(rs) > 0 {
			lowest = slices.Min(rs)
			var xs []string
			for _, r := range rs {
				xs = append(xs, contend.X(r))
			}
			byRound = fmt.Sprintf("lowest round %s (rounds %s; median %s)", contend.X(lowest), strings.Join(xs, ", "), contend.X(p.DoneRatio))
		}
	}
	if byRound == "" {
		byRound = contend.X(p.DoneRatio)
	}
	tail := contend.Ratio(p.P99Ms, p.P50Ms)
	var lost int64
	for _, a := range append(append(append([]contend.Result{}, d.Main...), d.Fairness...), d.Combine...) {
		if a.Instances > 0 {
			lost = max(lost, a.LostMax)
		}
	}
	o, _ := contend.Find(d.Main, Optimistic)
	ofloor := ""
	if or, ok := contend.Find(d.Main, OptimisticRelay); ok {
		ofloor = fmt.Sprintf(" (the statements it sends via bare Go relay: %s)", contend.X(or.DoneRatio))
	}
	return append([]results.Target{
		{Name: "throughput, 2× lockproxy (lock rule) / FOR UPDATE direct, in every round", Want: fmt.Sprintf("≥ %.2f×", TargetVsForUpdate), Got: byRound + floor, Met: lowest >= TargetVsForUpdate},
		{Name: "throughput, 2× lockproxy (optimistic rule) / FOR UPDATE direct", Want: fmt.Sprintf("≥ %.1f×", TargetOptimistic), Got: contend.X(o.DoneRatio) + ofloor, Met: o.DoneRatio >= TargetOptimistic},
		{Name: "Jain's index over clients, 2× lockproxy (lock rule)", Want: fmt.Sprintf("≥ %.2f", TargetJain), Got: fmt.Sprintf("%.3f", p.Jain), Met: p.Jain >= TargetJain},
		{Name: "throughput, 2× lockproxy / app-side Redis lock", Want: fmt.Sprintf("≥ %.1f×", TargetVsAppLock), Got: contend.X(d.VsAppLock), Met: d.VsAppLock >= TargetVsAppLock},
		{Name: "2× lockproxy latency p99 / p50", Want: fmt.Sprintf("≤ %.1f×", TargetTail), Got: contend.X(tail), Met: tail > 0 && tail <= TargetTail},
		{Name: "lost updates through lockproxy", Want: "0", Got: fmt.Sprint(lost), Met: lost == 0},
	}, combineTargets(d)...)
}

// combineTargets are the combining arms' targets against the conditional
// UPDATE directly; none for results from before those arms.
func combineTargets(d Data) []results.Target {
	c, ok := contend.Find(d.Combine, CondDirect)
	if !ok {
		return nil
	}
	var ts []results.Target
	for _, arm := range []struct{ name, label string }{{CombinedLock, "lock rule"}, {CombinedOptimistic, "optimistic rule"}} {
		a, ok := contend.Find(d.Combine, arm.name)
		if !ok {
			continue
		}
		ts = append(ts,
			results.Target{Name: "throughput, conditional UPDATE via 2× lockproxy with combine (" + arm.label + ") / directly", Want: fmt.Sprintf("≥ %.1f×", TargetCombined),
				Got: contend.X(a.DoneRatio), Met: a.DoneRatio >= TargetCombined},
			results.Target{Name: "p99, conditional UPDATE with combine (" + arm.label + ") / directly", Want: "≤ 1.0×",
				Got: fmt.Sprintf("%s (%.2f ms vs %.2f ms)", contend.X(contend.Ratio(a.P99Ms, c.P99Ms)), a.P99Ms, c.P99Ms), Met: a.P99Ms > 0 && a.P99Ms <= c.P99Ms},
			results.Target{Name: "Jain's index over clients, conditional UPDATE with combine (" + arm.label + ")", Want: fmt.Sprintf("≥ %.2f", TargetJain),
				Got: fmt.Sprintf("%.3f", a.Jain), Met: a.Jain >= TargetJain})
	}
	return ts
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d clients, one connection each, loop `BEGIN; SELECT stock FROM sku_stock WHERE sku_id = 1 [FOR UPDATE]; UPDATE sku_stock SET stock = <read-1> WHERE sku_id = 1; COMMIT` "+
		"(text protocol) for %.0f s per run, %d interleaved round(s). Through lockproxy the plain SELECT takes the row lock (rule `lock: [write, locking_read, read_in_txn]`, Redis backend); "+
		"clients alternate between the 2 instances. The app-side lock is `SET key token NX PX 10000`, retried after 5 ms sleeps, released by an owner-checked Lua script, around the same unsafe transaction sent directly. "+
		"*tx/s* counts committed transactions; latency is per committed transaction from its first attempt (so it includes every wait and retry); "+
		"ratios are medians of per-round ratios against FOR UPDATE direct. Throughput of lockproxy against the app-side lock: **%s**.\n\n",
		d.Clients, d.Seconds, d.Rounds, contend.X(d.VsAppLock))
	b.WriteString(contend.Table(d.Main, "tx"))
	b.WriteString(floorLine(d.Main))
	b.WriteString(contend.Errors(d.Main))
	b.WriteString("Fairness and the lock as lockproxy saw it (medians over rounds): Jain's index over the committed transactions of the 64 clients, " +
		"the busiest client's count over the least busy one's, and from lockproxy's `lockproxy_lock_wait_seconds` / `lockproxy_lock_hold_seconds` histograms the mean wait for the lock, " +
		"the mean time it was held, and *lock busy* = total hold time / run time: with one hot row, 1 − busy is the share of the run the row's lock was held by nobody, i.e. in handoff.\n\n")
	b.WriteString(lockTable(d.Main))
	b.WriteString("CPU per committed transaction (median over rounds):\n\n")
	b.WriteString(contend.CPUTable(d.Main, "tx"))
	fmt.Fprintf(&b, "**Handoff fairness** (%.0f s per run, one run each, same transaction): committed transactions per client, "+
		"Jain's index (1 = all clients served equally, 1/n = one client served), max/min transactions of one client, and the wait tail. "+
		"Ratios against FOR UPDATE direct with the same number of waiters.\n\n", d.FairSeconds)
	b.WriteString("| waiters | via | tx/s | ratio | p50 ms | p99 ms | p99/p50 | max ms | Jain | max/min per client | lock hold ms | lock busy | lost |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range d.Fairness {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %.2f | %.2f | %.1f | %.1f | %.3f | %s | %s | %s | %d |\n",
			clientsOf(a), contend.Via(a.Instances), a.DonePerSec, contend.X(a.DoneRatio), a.P50Ms, a.P99Ms,
			contend.Ratio(a.P99Ms, a.P50Ms), a.MaxMs, a.Jain, mom(a.MaxOverMin), opt(a.Instances, "%.2f", a.LockHoldMs), opt(a.Instances, "%.0f%%", a.LockBusy*100), a.LostMax)
	}
	b.WriteString("\n")
	b.WriteString(contend.Errors(d.Fairness))
	b.WriteString(combineSection(d))
	name := "hotkey-throughput.png"
	if err := drawMain(filepath.Join(plotDir, name), d.Main); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}

// floorLine says what the same FOR UPDATE transaction reached through the
// bare Go relay and where lockproxy stands against it; empty for results
// without that arm.
func floorLine(main []contend.Result) string {
	fr, ok := contend.Find(main, ForUpdateRelay)
	if !ok {
		return ""
	}
	p, _ := contend.Find(main, Proxy)
	return fmt.Sprintf("*%s* is the FOR UPDATE transaction sent through `bench/cmd/relay`, a TCP relay that parses nothing: InnoDB does the locking as directly, "+
		"but each of the four statements inside the serialized critical section crosses one more loopback hop. It reached **%s** FOR UPDATE direct; "+
		"that is the floor for any proxy on this host. lockproxy against it (median of paired rounds): **%s**.\n\n",
		ForUpdateRelay, contend.X(fr.DoneRatio), contend.X(contend.PairedRatio(p, fr, contend.Run.DonePerSec))) + lockFloorLine(main, p)
}

// lockFloorLine says what the unsafe transaction reached through the relay
// holding an in-memory lock where lockproxy's lock rule holds the row
// lock; empty for results without that arm.
func lockFloorLine(main []contend.Result, p contend.Result) string {
	lr, ok := contend.Find(main, ProxyRelay)
	if !ok {
		return ""
	}
	return fmt.Sprintf("*%s* is the unsafe transaction through the same relay run with `-txn-lock`: it takes one in-memory lock (first come, first served) before passing the SELECT on "+
		"and gives it back when the answer to COMMIT arrives, where lockproxy's lock rule takes and releases the row lock, so the SELECT's trip to MariaDB is inside the critical section as it is through lockproxy; "+
		"one process, so the lock passes between clients without a network hop or a Redis script. It reached **%s** FOR UPDATE direct: "+
		"the floor for any proxy that locks rows outside the database on this host. lockproxy against it (median of paired rounds): **%s**.\n\n",
		ProxyRelay, contend.X(lr.DoneRatio), contend.X(contend.PairedRatio(p, lr, contend.Run.DonePerSec)))
}

func clientsOf(a contend.Result) int {
	if len(a.Samples) == 0 {
		return 0
	}
	return a.Samples[0].Run.Clients
}

func mom(v float64) string {
	if v == 0 {
		return "∞ (a client starved)"
	}
	return fmt.Sprintf("%.2f", v)
}

func drawMain(path string, arms []contend.Result) error {
	var labels []string
	tps := chart.Series{Name: "committed tx/s (median)"}
	for _, a := range arms {
		labels = append(labels, a.Name)
		tps.Values = append(tps.Values, a.DonePerSec)
	}
	return chart.Bars(path, chart.Labels{Title: "one hot row, 64 clients: committed transactions per second", Y: "tx/s"}, labels, []chart.Series{tps})
}

// lockTable is fairness and lockproxy's own lock figures per arm.
func lockTable(arms []contend.Result) string {
	var b strings.Builder
	b.WriteString("| arm | Jain | max/min per client | lock wait ms | lock hold ms | lock busy |\n|---|--:|--:|--:|--:|--:|\n")
	for _, a := range arms {
		fmt.Fprintf(&b, "| %s | %.3f | %s | %s | %s | %s |\n", a.Name, a.Jain, mom(a.MaxOverMin),
			opt(a.Instances, "%.2f", a.LockWaitMs), opt(a.Instances, "%.2f", a.LockHoldMs), opt(a.Instances, "%.0f%%", a.LockBusy*100))
	}
	b.WriteString("\n")
	return b.String()
}

// opt formats v for arms through lockproxy and "–" for direct ones.
func opt(instances int, format string, v float64) string {
	if instances == 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// combineSection is the report on hot-row combining; empty for results
// from before its arms.
func combineSection(d Data) string {
	if len(d.Combine) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**Hot-row combining** (%d clients, %.0f s per run, %d interleaved round(s)): every client loops the seeds' safe statement, "+
		"the autocommit `UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock > 0` (text protocol), directly — one InnoDB commit per statement, the anchor — "+
		"and through 2 instances whose rule has `rewrite` (delta, min 0) and `combine: {}`, with `lock: [write]` (each batch holds the row's Redis lock once) "+
		"and with `lock: []` (batches of the two instances serialise on InnoDB's row lock); the FOR UPDATE transaction directly is beside them. "+
		"*UPDATE/s* counts statements that changed the row; ratios are medians of per-round ratios against the conditional UPDATE directly; "+
		"latency is per statement.\n\n", d.Clients, d.Seconds, d.Rounds)
	b.WriteString(contend.Table(d.Combine, "UPDATE"))
	b.WriteString(contend.Errors(d.Combine))
	b.WriteString(lockTable(d.Combine))
	b.WriteString("CPU per changed row (median over rounds):\n\n")
	b.WriteString(contend.CPUTable(d.Combine, "UPDATE"))
	return b.String()
}
