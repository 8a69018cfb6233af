package idleconn

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Report implements scenario.Scenario: the per-connection figures and
// every run's readings.
func (s *Scenario) Report(r *results.Result, _, _ string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each round starts a fresh lockproxy (no rules, memory lock backend), logs in once and runs `SELECT 1` "+
		"(the baseline), then opens %d connections through it (go-sql-driver/mysql, %d at a time), each running `SELECT 1` "+
		"once and then staying open and idle. lockproxy's VmRSS (`/proc/<pid>/status`) and the Go runtime's "+
		"`go_memstats_heap_inuse_bytes`, `go_memstats_stack_inuse_bytes` and `go_goroutines` (its `/metrics`) are read "+
		"%.0f s after the baseline login and %.0f s after the last connection opened, then again after lockproxy has run two garbage collections "+
		"(its `/debug/pprof/heap?gc=1`, twice: a stack one shrinks is given back at the end of the next; a server that has run for a while has had collections, which free what the logins left and shrink the goroutine stacks they grew); "+
		"per connection is (reading − baseline) / connections. "+
		"Every client connection pins one primary connection, whose buffers are lockproxy's and are counted. "+
		"The connections are then closed and RSS read again %s s later; *kept* is how much of the RSS they took is still held at the last reading.\n\n",
		d.Conns, dialers, d.SettleSeconds, d.SettleSeconds, joinSeconds(d.AfterCloseSeconds))
	fmt.Fprintf(&b, "| figure per idle connection (median) | open | after two collections |\n|---|--:|--:|\n")
	fmt.Fprintf(&b, "| RSS | **%.1f KiB** | %.1f KiB |\n| Go heap in use | %.1f KiB | %.1f KiB |\n| goroutine stacks | %.1f KiB | %.1f KiB |\n\n",
		d.RSSPerConn/1024, d.CollectedRSSPerConn/1024, d.HeapPerConn/1024, d.CollectedHeapPerConn/1024, d.StackPerConn/1024, d.CollectedStackPerConn/1024)
	b.WriteString("| round | connections | open in s | RSS base → open MiB | RSS KiB/conn | heap KiB/conn | stacks KiB/conn | goroutines/conn | after two collections: RSS, heap, stacks KiB/conn | RSS after close MiB | kept |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range d.Runs {
		var after []string
		for i, c := range m.Closed {
			at := 0.0
			if i < len(d.AfterCloseSeconds) {
				at = d.AfterCloseSeconds[i]
			}
			after = append(after, fmt.Sprintf("%.1f (%.0f s)", mib(c.RSS), at))
		}
		fmt.Fprintf(&b, "| %d | %d | %.1f | %.1f → %.1f | %.1f | %.1f | %.1f | %.2f | %.1f, %.1f, %.1f | %s | %.0f%% |\n",
			m.Round, m.Conns, m.ConnectSeconds, mib(m.Base.RSS), mib(m.Open.RSS), m.RSSPerConn/1024, m.HeapPerConn/1024,
			m.StackPerConn/1024, m.GoroutinesPerConn, m.CollectedRSSPerConn/1024, m.CollectedHeapPerConn/1024, m.CollectedStackPerConn/1024,
			strings.Join(after, ", "), 100*m.KeptShare)
	}
	b.WriteString("\n")
	return b.String(), nil
}

func joinSeconds(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(s, " and ")
}
