package soakreport

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/soak/growth"
	"github.com/lockproxy/lockproxy/bench/internal/soak/invariant"
	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/soak/workload"
)

// Report is everything a soak run reports.
type Report struct {
	Command  string
	Started  time.Time
	Warmup   time.Duration
	Duration time.Duration // the measured run
	Sample   time.Duration
	Machine  results.Machine
	CSV      string // the series file, as the report names it
	Rows     []growth.Row
	Checks   []invariant.Check
	Stmts    map[string]int64  // successful statements by kind
	Errs     map[string]int64  // client errors by code
	Msgs     map[string]string // the first message per error code
	Counters []sampling.CounterRow
	// HostBusy and ProxyCPU are means over the measured run's samples:
	// the host's busy share (0..1) and each instance's CPU in % of a core.
	HostBusy float64
	ProxyCPU []float64
	// PrimaryCPU is the primary mysqld's CPU over the measured run, % of a core.
	PrimaryCPU float64
}

// OK reports whether every bound and invariant held.
func (r *Report) OK() bool {
	for _, x := range r.Rows {
		if x.Bound != "" && !x.OK {
			return false
		}
	}
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Verdict is PASS or FAIL.
func (r *Report) Verdict() string {
	if r.OK() {
		return "PASS"
	}
	return "FAIL"
}

// Markdown renders the "## Latest run" section.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString(latestHeading + "\n\n")
	fmt.Fprintf(&b, "**%s** — `%s`, started %s; warm-up %s, measured run %s, samples every %s.\n\n",
		r.Verdict(), r.Command, r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Warmup, r.Duration, r.Sample)
	r.writeMachine(&b)
	r.writeGrowth(&b)
	b.WriteString("\n### Invariants\n\n| invariant | value | ok |\n|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, c.Value, yesNo(c.OK))
	}
	r.writeWorkload(&b)
	if len(r.Counters) > 0 {
		b.WriteString("\n### lockproxy counters over the measured run\n\n| counter | instance | increase |\n|---|---|---|\n")
		for _, c := range r.Counters {
			fmt.Fprintf(&b, "| `%s` | %d | %.0f |\n", c.Name, c.Instance, c.Delta)
		}
	}
	if r.CSV != "" {
		fmt.Fprintf(&b, "\nSeries: `%s`.\n", r.CSV)
	}
	return b.String()
}

// writeMachine writes the machine and load paragraph.
func (r *Report) writeMachine(b *strings.Builder) {
	m := r.Machine
	dirty := ""
	if m.CommitDirty {
		dirty = " (tree modified)"
	}
	fmt.Fprintf(b, "Machine: %d CPUs (`nproc`), %s, %d MiB; %s; lockproxy %s%s; load average %s at the start, %s at the end.\n",
		m.NProc, orDash(m.CPUModel), m.MemTotalMB, orDash(m.GoVersion), orDash(shortCommit(m.Commit)), dirty, orDash(m.LoadAvgStart), orDash(m.LoadAvgEnd))
	fmt.Fprintf(b, "During the measured run the host was %.0f%% busy on average", 100*r.HostBusy)
	for i, c := range r.ProxyCPU {
		fmt.Fprintf(b, "; instance %d used %.0f%% of a core", i, c)
	}
	if r.PrimaryCPU > 0 {
		fmt.Fprintf(b, ", the primary mysqld %.0f%%", r.PrimaryCPU)
	}
	b.WriteString(".\n\n")
}

// writeGrowth writes the bounds table.
func (r *Report) writeGrowth(b *strings.Builder) {
	b.WriteString("### Growth, end against start\n\n")
	b.WriteString("| metric | instance | start | end | bound | ok |\n|---|---|---|---|---|---|\n")
	for _, x := range r.Rows {
		ok, bound := "no", x.Bound
		switch {
		case x.Bound == "":
			ok, bound = "—", "(reading only)"
		case x.OK:
			ok = "yes"
		}
		fmt.Fprintf(b, "| %s (%s) | %d | %s | %s | %s | %s |\n", x.Metric, x.State, x.Instance,
			growth.FormatValue(x.Metric, x.Start), growth.FormatValue(x.Metric, x.End), bound, ok)
	}
}

// writeWorkload writes the statement and error tables.
func (r *Report) writeWorkload(b *strings.Builder) {
	b.WriteString("\n### Workload (warm-up and measured run)\n\n| statements / operations | count |\n|---|---|\n")
	var total int64
	for _, k := range sortedKeys(r.Stmts) {
		fmt.Fprintf(b, "| %s | %d |\n", k, r.Stmts[k])
		total += r.Stmts[k]
	}
	fmt.Fprintf(b, "| **total** | **%d** |\n", total)

	b.WriteString("\n| error | count | expected | first message |\n|---|---|---|---|\n")
	if len(r.Errs) == 0 {
		b.WriteString("| none | 0 | | |\n")
	}
	for _, k := range sortedKeys(r.Errs) {
		exp := "no"
		if workload.ExpectedErrors[k] {
			exp = "yes (contention)"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", k, r.Errs[k], exp, cell(r.Msgs[k]))
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// cell makes s safe for one Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
