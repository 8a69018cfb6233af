package overhead

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Report implements scenario.Scenario: a table of medians and ratios, and
// two charts (ratio per configuration against the 0.60 target; qps both
// ways).
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
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
	writeCPU(&b, d.Cells)
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
	for _, c := range d.Cells {
		labels = append(labels, c.Label())
		direct.Values = append(direct.Values, c.Direct.QPS)
		proxy.Values = append(proxy.Values, c.Proxy.QPS)
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
		labels, []chart.Series{direct, proxy})
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
