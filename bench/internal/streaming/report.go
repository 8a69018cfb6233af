package streaming

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Report implements scenario.Scenario: the summary, every run, and a chart
// of lockproxy's RSS over time for the first fast and slow runs.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`SELECT * FROM benchstream.big`: %d rows, %.0f MB of column data, read to the last row with "+
		"go-sql-driver/mysql (text protocol, `sql.RawBytes`). Each proxied run uses a fresh lockproxy; its VmRSS is sampled "+
		"every %.0f ms from `/proc/<pid>/status`; *growth* is max(sampled peak − baseline, VmHWM at end − VmHWM at baseline). "+
		"The slow reader sleeps %.0f ms every %d rows.\n\n",
		d.Rows, d.ResultMB, d.SampleMs, d.SleepMs, d.SleepEvery)
	b.WriteString("| figure | value |\n|---|--:|\n")
	fmt.Fprintf(&b, "| direct, median time | %.2f s (%.0f rows/s) |\n", d.DirectSeconds, d.DirectRowsPerSec)
	fmt.Fprintf(&b, "| through lockproxy, median time | %.2f s (%.0f rows/s) |\n", d.ProxySeconds, d.ProxyRowsPerSec)
	fmt.Fprintf(&b, "| time ratio proxy / direct | **%.2f** |\n", d.TimeRatio)
	fmt.Fprintf(&b, "| lockproxy baseline RSS (median) | %.1f MiB |\n", d.BaselineMB)
	fmt.Fprintf(&b, "| RSS growth, fast reader (worst run) | **%.1f MiB** |\n", d.FastGrowthMB)
	fmt.Fprintf(&b, "| RSS growth, slow reader (worst run) | **%.1f MiB** (median read %.1f s) |\n\n", d.SlowGrowthMB, d.SlowSeconds)
	b.WriteString("| path | reader | round | rows | seconds | baseline RSS MiB | peak RSS MiB | VmHWM base→end MiB | growth MiB |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range d.Runs {
		if m.Path == Direct {
			fmt.Fprintf(&b, "| direct | %s | %d | %d | %.2f | | | | |\n", m.Reader, m.Round, m.Rows, m.Seconds)
			continue
		}
		fmt.Fprintf(&b, "| proxy | %s | %d | %d | %.2f | %.1f | %.1f | %.1f → %.1f | %.1f |\n", m.Reader, m.Round, m.Rows, m.Seconds,
			mb(m.BaselineRSS), mb(m.PeakRSS), mb(m.BaselineHWM), mb(m.EndHWM), mb(m.Growth))
	}
	b.WriteString("\n")
	name := "streaming-rss.png"
	if err := s.chart(d, filepath.Join(plotDir, name)); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}

// chart draws RSS over time for the first proxied run of each reader.
func (s *Scenario) chart(d Data, path string) error {
	var lines []chart.Line
	seen := map[string]bool{}
	for _, m := range d.Runs {
		if m.Path != Proxy || seen[m.Reader] || len(m.Samples) == 0 {
			continue
		}
		seen[m.Reader] = true
		ln := chart.Line{Name: fmt.Sprintf("%s reader (%.1f s)", m.Reader, m.Seconds)}
		for _, p := range m.Samples {
			ln.X, ln.Y = append(ln.X, p.At), append(ln.Y, p.RSSMB)
		}
		lines = append(lines, ln)
	}
	return chart.Lines(path, chart.Labels{Title: "lockproxy RSS while streaming 1,000,000 rows", X: "seconds since the query was sent", Y: "VmRSS (MiB)"},
		lines, chart.Ref{Value: d.BaselineMB + TargetGrowthMB, Label: fmt.Sprintf("baseline + %.0f MiB target", TargetGrowthMB)})
}
