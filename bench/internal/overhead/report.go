package overhead

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Report implements scenario.Scenario: what the relays that parse nothing
// reached, a table of medians and ratios, the relays' table, CPU per
// query, and charts (ratio per configuration against the 0.50 target; qps
// of every target; lockproxy's and the relays' ratios side by side).
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(floorSummary(d.Cells))
	fmt.Fprintf(&b, "%d interleaved rounds of %d s per run and side; sysbench `--tables=%d --table-size=%d`, uniform keys. "+
		"Figures are medians over rounds; *ratio* is the median of the per-round proxy/direct qps ratios; "+
		"*added* is (proxy − direct) median average latency per query. Latencies per sysbench event "+
		"(a transaction of ~%s queries for read_write).\n\n",
		d.Rounds, d.Seconds, d.Tables, d.TableSize, rwQueries(d.Cells))
	b.WriteString("| workload | thr | ps | direct qps | proxy qps | ratio | direct avg µs | proxy avg µs | added µs/query | direct p95 / p99 ms | proxy p95 / p99 ms | errors | failed runs |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range d.Cells {
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.2f** | %.1f | %.1f | **%.1f** | %.2f / %.2f | %.2f / %.2f | %d / %d | %d / %d |\n",
			short(c.Test), c.Threads, c.PSMode,
			c.Direct.QPS, c.Direct.QPSMin, c.Direct.QPSMax, c.Proxy.QPS, c.Proxy.QPSMin, c.Proxy.QPSMax, c.Ratio,
			c.Direct.AvgMs*1000, c.Proxy.AvgMs*1000, c.AddedUs,
			c.Direct.P95Ms, c.Direct.P99Ms, c.Proxy.P95Ms, c.Proxy.P99Ms, c.Direct.Errors, c.Proxy.Errors, c.Direct.Failed, c.Proxy.Failed)
	}
	b.WriteString("\nqps cells show the median and (min–max) over rounds; errors are sysbench's ignored errors (deadlocks, lock wait timeouts), direct / proxy; " +
		"failed runs are sysbench runs that ended in an error, direct / proxy (excluded from the medians).\n\n")
	writeFailures(&b, d.Cells)
	writeReplica(&b, d.Cells)
	writeMux(&b, d.Cells)
	writeRelays(&b, d.Cells)
	writeCPU(&b, d.Cells)
	writeRelayCPU(&b, d.Cells)
	charts, err := s.charts(d, plotDir)
	if err != nil {
		return "", err
	}
	for _, c := range charts {
		fmt.Fprintf(&b, "![%s](%s)\n\n", c, filepath.ToSlash(filepath.Join(relDir, c)))
	}
	return b.String(), nil
}

// writeCPU is the CPU accounting table: on a saturated 2-core host,
// throughput follows the CPU each query costs all processes together.
func writeCPU(b *strings.Builder, cells []Cell) {
	b.WriteString("CPU per query (µs of user+system CPU, median over rounds) of sysbench, the primary's mysqld and lockproxy; " +
		"*CPU ratio* = direct total / proxy total, the throughput ratio to expect when the host's cores are the bottleneck.\n\n")
	b.WriteString("| workload | thr | ps | direct: sysbench + mysqld = total | proxy: sysbench + mysqld + lockproxy = total | CPU ratio | qps ratio | host busy direct / proxy |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|\n")
	for _, c := range cells {
		dt := c.Direct.ClientCPUUs + c.Direct.MysqldCPUUs
		pt := c.Proxy.ClientCPUUs + c.Proxy.MysqldCPUUs + c.Proxy.ProxyCPUUs
		cr := 0.0
		if pt > 0 {
			cr = dt / pt
		}
		fmt.Fprintf(b, "| %s | %d | %s | %.1f + %.1f = %.1f | %.1f + %.1f + %.1f = %.1f | %.2f | %.2f | %.0f%% / %.0f%% |\n",
			short(c.Test), c.Threads, c.PSMode, c.Direct.ClientCPUUs, c.Direct.MysqldCPUUs, dt,
			c.Proxy.ClientCPUUs, c.Proxy.MysqldCPUUs, c.Proxy.ProxyCPUUs, pt, cr, c.Ratio,
			c.Direct.HostBusy*100, c.Proxy.HostBusy*100)
	}
	b.WriteString("\n")
}

// writeReplica is the table of the replica route: point selects straight
// at the replica against a lockproxy that routes them there, next to the
// primary route's figures of the same rounds.
func writeReplica(b *strings.Builder, cells []Cell) {
	var with []Cell
	for _, c := range cells {
		if c.HasReplica() {
			with = append(with, c)
		}
	}
	if len(with) == 0 {
		return
	}
	b.WriteString("**The replica route**, same rounds: sysbench straight at the replica, and through a second lockproxy that has the replica configured " +
		"(`backends.replicas`), so that it routes the point selects there. *ratio* and *added* as above, against direct at the replica; " +
		"*replica / primary* is the replica route's ratio over the primary route's: 1.00 when a replica-routed point select costs what a primary-routed one does. " +
		"*on the replica* is the share of that lockproxy's statements (`lockproxy_queries_total` by route, read before and after each run) that went to the replica.\n\n")
	b.WriteString("| workload | thr | ps | replica direct qps | replica via lockproxy qps | ratio | added µs/query | primary route ratio / added µs | replica / primary | on the replica | lockproxy CPU µs/query replica / primary route | failed runs direct / via lockproxy |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range with {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | **%s** | **%s** | %.2f / %.1f | **%s** | %.1f%% | %.1f / %.1f | %d / %d |\n",
			short(c.Test), c.Threads, c.PSMode, qpsRange(c.ReplicaDirect), qpsRange(c.ProxyReplica),
			fixed(c.ReplicaRatio, c.ProxyReplica), us(c.ReplicaAddedUs, c.ProxyReplica), c.Ratio, c.AddedUs,
			fixed(c.ReplicaVsPrimary, c.ProxyReplica), c.ProxyReplica.ReplicaShare*100,
			c.ProxyReplica.ProxyCPUUs, c.Proxy.ProxyCPUUs, c.ReplicaDirect.Failed, c.ProxyReplica.Failed)
	}
	b.WriteString("\n")
}

// writeMux is the table of multiplexing on against off: a third
// lockproxy, with backends.pool.multiplex, in the same rounds.
func writeMux(b *strings.Builder, cells []Cell) {
	var with []Cell
	for _, c := range cells {
		if c.HasMux() {
			with = append(with, c)
		}
	}
	if len(with) == 0 {
		return
	}
	b.WriteString("**Multiplexing on and off**, same rounds: a third lockproxy with `backends.pool.multiplex: true` (`max_connections: 200`), " +
		"where a session borrows a primary connection for each statement (or transaction) and gives it back, against the lockproxy above, which keeps one per session. " +
		"*ratio* against direct as above; *on / off* is the median of the per-round ratios of the two lockproxies; *added* is what multiplexing adds per query over keeping the connection.\n\n")
	b.WriteString("| workload | thr | ps | off qps | on qps | ratio off / on | on / off | added µs/query | lockproxy CPU µs/query off / on | failed runs off / on |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range with {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %.2f / %s | **%s** | %s | %.1f / %.1f | %d / %d |\n",
			short(c.Test), c.Threads, c.PSMode, qpsRange(c.Proxy), qpsRange(c.ProxyMux),
			c.Ratio, fixed(c.MuxRatio, c.ProxyMux), fixed(c.MuxVsProxy, c.ProxyMux), us(c.MuxOverProxy, c.ProxyMux),
			c.Proxy.ProxyCPUUs, c.ProxyMux.ProxyCPUUs, c.Proxy.Failed, c.ProxyMux.Failed)
	}
	b.WriteString("\n")
}

// hasRelays reports whether any cell holds relay runs.
func hasRelays(cells []Cell) bool {
	for _, c := range cells {
		if c.HasRelays() {
			return true
		}
	}
	return false
}

// floorSummary is one line per configuration saying what a relay that
// parses nothing reached in the same rounds, and where lockproxy stands
// against it. Empty for results without relay runs.
func floorSummary(cells []Cell) string {
	if !hasRelays(cells) {
		return ""
	}
	var b strings.Builder
	b.WriteString("**The floor on this host**: in the same rounds, sysbench also ran through two relays that parse nothing " +
		"(the bare Go relay `bench/cmd/relay`: accept, dial, `io.Copy` both ways; and `socat`). What they reach is what any proxy, " +
		"one extra loopback hop, can reach here; lockproxy is measured against them as well as against direct.\n\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "- %s: qps / direct: bare Go relay **%s**, socat %s, lockproxy **%.2f** = **%s the bare Go relay**; "+
			"µs added per query: Go relay %s, socat %s, lockproxy %.1f (lockproxy − Go relay: **%s**)\n",
			c.Label(), fixed(c.GoRelayRatio, c.GoRelay), fixed(c.SocatRatio, c.Socat), c.Ratio, times(c.ProxyVsGoRelay),
			us(c.GoRelayAddedUs, c.GoRelay), us(c.SocatAddedUs, c.Socat), c.AddedUs, signedUs(c.ProxyOverGoRelayUs, c.GoRelay))
	}
	b.WriteString("\n")
	return b.String()
}

// fixed formats a ratio, or "failed" when the side has no successful run.
func fixed(v float64, s Side) string {
	if s.QPS == 0 {
		return "failed"
	}
	return fmt.Sprintf("%.2f", v)
}

// times formats a qps ratio as "0.97×", or "–" for none.
func times(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

// us formats added µs, or "failed" when the side has no successful run.
func us(v float64, s Side) string {
	if s.QPS == 0 {
		return "failed"
	}
	return fmt.Sprintf("%.1f", v)
}

// signedUs formats a difference of µs with its sign, or "–" when the
// relay side has no successful run.
func signedUs(v float64, relay Side) string {
	if relay.QPS == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f µs", v)
}

// writeRelays is the table of the relay arms: each relay against direct,
// and lockproxy against the bare Go relay.
func writeRelays(b *strings.Builder, cells []Cell) {
	if !hasRelays(cells) {
		return
	}
	b.WriteString("Relays that parse nothing, same rounds (the order of the four runs of a configuration reverses every other round). " +
		"*ratio* and *added* as above, against direct; *lockproxy / Go relay* is the median of the per-round lockproxy / bare Go relay qps ratios, " +
		"*lockproxy − Go relay* the difference of their median average latencies per query: what lockproxy costs beyond the hop itself.\n\n")
	b.WriteString("| workload | thr | ps | Go relay qps | ratio | added µs/query | socat qps | ratio | added µs/query | lockproxy / Go relay | lockproxy − Go relay µs/query | Go relay / socat p99 ms | failed runs Go relay / socat |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range cells {
		fmt.Fprintf(b, "| %s | %d | %s | %s | **%s** | **%s** | %s | %s | %s | **%s** | **%s** | %.2f / %.2f | %d / %d |\n",
			short(c.Test), c.Threads, c.PSMode,
			qpsRange(c.GoRelay), fixed(c.GoRelayRatio, c.GoRelay), us(c.GoRelayAddedUs, c.GoRelay),
			qpsRange(c.Socat), fixed(c.SocatRatio, c.Socat), us(c.SocatAddedUs, c.Socat),
			times(c.ProxyVsGoRelay), signedUs(c.ProxyOverGoRelayUs, c.GoRelay),
			c.GoRelay.P99Ms, c.Socat.P99Ms, c.GoRelay.Failed, c.Socat.Failed)
	}
	b.WriteString("\n")
}

// qpsRange formats a side's median qps with its (min–max), or "failed".
func qpsRange(s Side) string {
	if s.QPS == 0 {
		return "failed"
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", s.QPS, s.QPSMin, s.QPSMax)
}

// writeRelayCPU is the CPU accounting of the relay runs, like writeCPU's.
func writeRelayCPU(b *strings.Builder, cells []Cell) {
	if !hasRelays(cells) {
		return
	}
	b.WriteString("CPU per query through the relays (µs, median over rounds; socat's per-connection children included).\n\n")
	b.WriteString("| workload | thr | ps | Go relay: sysbench + mysqld + relay = total | socat: sysbench + mysqld + socat = total | host busy Go relay / socat |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|\n")
	for _, c := range cells {
		g, so := c.GoRelay, c.Socat
		fmt.Fprintf(b, "| %s | %d | %s | %.1f + %.1f + %.1f = %.1f | %.1f + %.1f + %.1f = %.1f | %.0f%% / %.0f%% |\n",
			short(c.Test), c.Threads, c.PSMode,
			g.ClientCPUUs, g.MysqldCPUUs, g.RelayCPUUs, g.ClientCPUUs+g.MysqldCPUUs+g.RelayCPUUs,
			so.ClientCPUUs, so.MysqldCPUUs, so.RelayCPUUs, so.ClientCPUUs+so.MysqldCPUUs+so.RelayCPUUs,
			g.HostBusy*100, so.HostBusy*100)
	}
	b.WriteString("\n")
}

// writeFailures lists each distinct failure once, with where it happened.
func writeFailures(b *strings.Builder, cells []Cell) {
	seen := map[string][]string{}
	var order []string
	for _, c := range cells {
		for _, m := range c.Runs {
			if !m.Failed {
				continue
			}
			if _, ok := seen[m.Error]; !ok {
				order = append(order, m.Error)
			}
			seen[m.Error] = append(seen[m.Error], fmt.Sprintf("%s %s round %d", c.Label(), m.Target, m.Round))
		}
	}
	if len(order) == 0 {
		return
	}
	b.WriteString("**Failed runs:**\n\n")
	for _, e := range order {
		fmt.Fprintf(b, "- `%s` — %s\n", e, strings.Join(seen[e], "; "))
	}
	b.WriteString("\n")
}

func short(test string) string { return strings.TrimPrefix(test, "oltp_") }

func rwQueries(cells []Cell) string {
	for _, c := range cells {
		if c.Test == "oltp_read_write" {
			return fmt.Sprintf("%.0f", c.QueriesPerEvent)
		}
	}
	return "18–20"
}

// charts draws the ratio and qps charts into plotDir and returns their names.
func (s *Scenario) charts(d Data, plotDir string) ([]string, error) {
	groups, ratios := ratioSeries(d.Cells)
	var labels []string
	direct, proxy := chart.Series{Name: "direct"}, chart.Series{Name: "through lockproxy"}
	goRelay, socat := chart.Series{Name: "through the bare Go relay"}, chart.Series{Name: "through socat"}
	pr, gr, sr := chart.Series{Name: "lockproxy"}, chart.Series{Name: "bare Go relay"}, chart.Series{Name: "socat"}
	for _, c := range d.Cells {
		labels = append(labels, c.Label())
		direct.Values = append(direct.Values, c.Direct.QPS)
		proxy.Values = append(proxy.Values, c.Proxy.QPS)
		goRelay.Values = append(goRelay.Values, c.GoRelay.QPS)
		socat.Values = append(socat.Values, c.Socat.QPS)
		pr.Values, gr.Values, sr.Values = append(pr.Values, c.Ratio), append(gr.Values, c.GoRelayRatio), append(sr.Values, c.SocatRatio)
	}
	qps := []chart.Series{direct, proxy}
	if hasRelays(d.Cells) {
		qps = append(qps, goRelay, socat)
	}
	names := []string{"overhead-ratio.png", "overhead-qps.png"}
	err := chart.Bars(filepath.Join(plotDir, names[0]),
		chart.Labels{Title: "lockproxy overhead: qps through the proxy / direct (median of paired rounds)", Y: "ratio"},
		groups, ratios, chart.Ref{Value: TargetRatio8, Label: fmt.Sprintf("target at 8 threads: %.2f", TargetRatio8)}, chart.Ref{Value: 1, Label: "same as direct"})
	if err != nil {
		return nil, err
	}
	err = chart.Bars(filepath.Join(plotDir, names[1]),
		chart.Labels{Title: "sysbench queries per second (median of rounds)", Y: "qps"},
		labels, qps)
	if err != nil {
		return nil, err
	}
	if !hasRelays(d.Cells) {
		return names, nil
	}
	names = append(names, "overhead-floor.png")
	err = chart.Bars(filepath.Join(plotDir, names[2]),
		chart.Labels{Title: "qps / direct: lockproxy and two relays that parse nothing (median of paired rounds)", Y: "ratio"},
		labels, []chart.Series{pr, gr, sr}, chart.Ref{Value: TargetRatio8, Label: fmt.Sprintf("lockproxy target at 8 threads: %.2f", TargetRatio8)}, chart.Ref{Value: 1, Label: "same as direct"})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// ratioSeries groups the ratios by workload and threads, one series per
// --db-ps-mode.
func ratioSeries(cells []Cell) ([]string, []chart.Series) {
	var groups, modes []string
	at := map[string]map[string]float64{}
	for _, c := range cells {
		g := fmt.Sprintf("%s %dt", short(c.Test), c.Threads)
		if at[g] == nil {
			at[g] = map[string]float64{}
			groups = append(groups, g)
		}
		if !contains(modes, c.PSMode) {
			modes = append(modes, c.PSMode)
		}
		at[g][c.PSMode] = c.Ratio
	}
	var series []chart.Series
	for _, m := range modes {
		s := chart.Series{Name: "--db-ps-mode=" + m}
		for _, g := range groups {
			s.Values = append(s.Values, at[g][m])
		}
		series = append(series, s)
	}
	return groups, series
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
