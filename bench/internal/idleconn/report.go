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
		"On a *pinned* instance every client connection pins one primary connection, whose structures are lockproxy's and are counted; on a *multiplexed* one (`backends.pool.multiplex: true`), started alike in each round, an idle session holds none. "+
		"The connections are then closed and RSS read again %s s later; *kept* is how much of the RSS they took is still held at the last reading.\n\n",
		d.Conns, dialers, d.SettleSeconds, d.SettleSeconds, joinSeconds(d.AfterCloseSeconds))
	p := d.Summary
	kib := func(x float64) string { return fmt.Sprintf("%.1f KiB", x/1024) }
	if m := d.Multiplexed; m != nil {
		b.WriteString("| figure per idle connection (median) | pinned, open | pinned, after two collections | multiplexed, open | multiplexed, after two collections |\n|---|--:|--:|--:|--:|\n")
		fmt.Fprintf(&b, "| RSS | **%s** | %s | **%s** | %s |\n", kib(p.RSSPerConn), kib(p.CollectedRSSPerConn), kib(m.RSSPerConn), kib(m.CollectedRSSPerConn))
		fmt.Fprintf(&b, "| Go heap in use | %s | %s | %s | %s |\n", kib(p.HeapPerConn), kib(p.CollectedHeapPerConn), kib(m.HeapPerConn), kib(m.CollectedHeapPerConn))
		fmt.Fprintf(&b, "| goroutine stacks | %s | %s | %s | %s |\n\n", kib(p.StackPerConn), kib(p.CollectedStackPerConn), kib(m.StackPerConn), kib(m.CollectedStackPerConn))
	} else {
		fmt.Fprintf(&b, "| figure per idle connection (median) | open | after two collections |\n|---|--:|--:|\n")
		fmt.Fprintf(&b, "| RSS | **%s** | %s |\n| Go heap in use | %s | %s |\n| goroutine stacks | %s | %s |\n\n",
			kib(p.RSSPerConn), kib(p.CollectedRSSPerConn), kib(p.HeapPerConn), kib(p.CollectedHeapPerConn), kib(p.StackPerConn), kib(p.CollectedStackPerConn))
	}
	b.WriteString("| round | instance | connections | open in s | RSS base → open MiB | RSS KiB/conn | heap KiB/conn | stacks KiB/conn | goroutines/conn | after two collections: RSS, heap, stacks KiB/conn | RSS after close MiB | kept |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range d.Runs {
		var after []string
		for i, c := range m.Closed {
			at := 0.0
			if i < len(d.AfterCloseSeconds) {
				at = d.AfterCloseSeconds[i]
			}
			after = append(after, fmt.Sprintf("%.1f (%.0f s)", mib(c.RSS), at))
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %.1f | %.1f → %.1f | %.1f | %.1f | %.1f | %.2f | %.1f, %.1f, %.1f | %s | %.0f%% |\n",
			m.Round, m.mode(), m.Conns, m.ConnectSeconds, mib(m.Base.RSS), mib(m.Open.RSS), m.RSSPerConn/1024, m.HeapPerConn/1024,
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
