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
		"(a transaction of ~%s queries for read_write). CPU columns are µs of process CPU per query.\n\n",
		d.Rounds, d.Seconds, d.Tables, d.TableSize, rwQueries(d.Cells))
	b.WriteString("| workload | thr | ps | direct qps | proxy qps | ratio | direct avg µs | proxy avg µs | added µs/query | direct p95/p99 ms | proxy p95/p99 ms | proxy CPU µs/q | mysqld CPU µs/q direct→proxy | host busy | errors |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range d.Cells {
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.2f** | %.1f | %.1f | **%.1f** | %.2f / %.2f | %.2f / %.2f | %.1f | %.1f → %.1f | %.0f%% / %.0f%% | %d / %d |\n",
			strings.TrimPrefix(c.Test, "oltp_"), c.Threads, c.PSMode,
			c.Direct.QPS, c.Direct.QPSMin, c.Direct.QPSMax, c.Proxy.QPS, c.Proxy.QPSMin, c.Proxy.QPSMax, c.Ratio,
			c.Direct.AvgMs*1000, c.Proxy.AvgMs*1000, c.AddedUs,
			c.Direct.P95Ms, c.Direct.P99Ms, c.Proxy.P95Ms, c.Proxy.P99Ms,
			c.Proxy.ProxyCPUUs, c.Direct.MysqldCPUUs, c.Proxy.MysqldCPUUs,
			c.Direct.HostBusy*100, c.Proxy.HostBusy*100, c.Direct.Errors, c.Proxy.Errors)
	}
	b.WriteString("\nqps cells show the median and (min–max) over rounds; host busy is direct / proxy; errors are sysbench's ignored errors, direct / proxy.\n\n")
	charts, err := s.charts(d, plotDir)
	if err != nil {
		return "", err
	}
	for _, c := range charts {
		fmt.Fprintf(&b, "![%s](%s)\n\n", c, filepath.ToSlash(filepath.Join(relDir, c)))
	}
	return b.String(), nil
}

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
	var labels []string
	ratio := chart.Series{Name: "proxy / direct qps"}
	direct, proxy := chart.Series{Name: "direct"}, chart.Series{Name: "through lockproxy"}
	for _, c := range d.Cells {
		labels = append(labels, c.Label())
		ratio.Values = append(ratio.Values, c.Ratio)
		direct.Values = append(direct.Values, c.Direct.QPS)
		proxy.Values = append(proxy.Values, c.Proxy.QPS)
	}
	names := []string{"overhead-ratio.png", "overhead-qps.png"}
	err := chart.Bars(filepath.Join(plotDir, names[0]),
		chart.Labels{Title: "lockproxy overhead: throughput through the proxy / direct (median of rounds)", Y: "ratio"},
		labels, []chart.Series{ratio}, chart.Ref{Value: TargetRatio8, Label: fmt.Sprintf("target at 8 threads: %.2f", TargetRatio8)}, chart.Ref{Value: 1, Label: "direct"})
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
