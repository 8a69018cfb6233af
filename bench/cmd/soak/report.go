package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Growth bounds, end against start, per instance. Goroutines and open fds
// are compared idle against idle (every client closed, before and after the
// measured run), where both should be back at the same baseline: any growth
// is something left behind. Memory is compared under load against under
// load (the median of the last few samples of the warm-up and of the
// measured run), since idle RSS depends on when the Go runtime returns
// memory to the kernel rather than on what lockproxy still holds.
const (
	maxGoroutineGrowth = 10       // idle vs idle, absolute
	maxFDGrowth        = 5        // idle vs idle, absolute
	memGrowthAbs       = 16 << 20 // under load vs under load: start + max(memGrowthRel*start, 16 MiB)
	memGrowthRel       = 0.25
	loadedSamples      = 3 // samples whose median is a loaded snapshot
)

// States in which a snapshot is taken.
const (
	stateIdle = "idle"
	stateLoad = "under load"
)

// bound is one growth limit: end <= start + max(Abs, Rel*start).
type bound struct {
	Metric string // a gauge name
	State  string // stateIdle or stateLoad
	Abs    float64
	Rel    float64
}

// bounds are the checked comparisons, in report order.
var bounds = []bound{
	{Metric: "go_goroutines", State: stateIdle, Abs: maxGoroutineGrowth},
	{Metric: "process_open_fds", State: stateIdle, Abs: maxFDGrowth},
	{Metric: "process_resident_memory_bytes", State: stateLoad, Abs: memGrowthAbs, Rel: memGrowthRel},
	{Metric: "go_memstats_heap_inuse_bytes", State: stateLoad, Abs: memGrowthAbs, Rel: memGrowthRel},
}

// infos are comparisons shown for reading but not checked.
var infos = []bound{
	{Metric: "go_goroutines", State: stateLoad},
	{Metric: "process_open_fds", State: stateLoad},
	{Metric: "process_resident_memory_bytes", State: stateIdle},
	{Metric: "go_memstats_heap_inuse_bytes", State: stateIdle},
}

// limit is the highest end value start allows.
func (b bound) limit(start float64) float64 { return start + math.Max(b.Abs, b.Rel*start) }

// text states the bound for the report.
func (b bound) text() string {
	if b.Rel == 0 {
		return fmt.Sprintf("start + %s", formatValue(b.Metric, b.Abs))
	}
	return fmt.Sprintf("start + max(%.0f%%, %s)", 100*b.Rel, formatValue(b.Metric, b.Abs))
}

// isBytes reports whether a gauge is a byte count.
func isBytes(metric string) bool { return strings.HasSuffix(metric, "_bytes") }

// formatValue renders v in the metric's unit.
func formatValue(metric string, v float64) string {
	if isBytes(metric) {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// snapshot is one instance's gauges in one state.
type snapshot map[string]float64

// snapshots are one instance's four readings.
type snapshots struct {
	IdleStart, IdleEnd, LoadStart, LoadEnd snapshot
}

// pair returns the start and end snapshots of a state.
func (s snapshots) pair(state string) (snapshot, snapshot) {
	if state == stateIdle {
		return s.IdleStart, s.IdleEnd
	}
	return s.LoadStart, s.LoadEnd
}

// row is one line of the bounds table.
type row struct {
	Metric   string
	State    string
	Instance int
	Start    float64
	End      float64
	Bound    string // "" for a reading that is not checked
	OK       bool
}

// compare builds the bounds table rows (checked, then informational) for
// every instance.
func compare(per []snapshots) []row {
	var rows []row
	for _, b := range bounds {
		for i, s := range per {
			start, end := s.pair(b.State)
			rows = append(rows, row{Metric: b.Metric, State: b.State, Instance: i,
				Start: start[b.Metric], End: end[b.Metric], Bound: b.text(), OK: end[b.Metric] <= b.limit(start[b.Metric])})
		}
	}
	for _, b := range infos {
		for i, s := range per {
			start, end := s.pair(b.State)
			rows = append(rows, row{Metric: b.Metric, State: b.State, Instance: i,
				Start: start[b.Metric], End: end[b.Metric], OK: true})
		}
	}
	return rows
}

// check is one invariant.
type check struct {
	Name  string
	Value string
	OK    bool
}

// report is everything the run reports.
type report struct {
	Command  string
	Started  time.Time
	Warmup   time.Duration
	Duration time.Duration // the measured run
	Sample   time.Duration
	Machine  results.Machine
	CSV      string
	Rows     []row
	Checks   []check
	Stmts    map[string]int64
	Errs     map[string]int64
	Msgs     map[string]string
	Counters []counterRow
	// HostBusy and ProxyCPU are means over the measured run's samples:
	// the host's busy share (0..1) and each instance's CPU in % of a core.
	HostBusy float64
	ProxyCPU []float64
	// PrimaryCPU is the primary mysqld's CPU over the measured run, % of a core.
	PrimaryCPU float64
}

// counterRow is a lockproxy counter's increase over the measured run.
type counterRow struct {
	Name     string
	Instance int
	Delta    float64
}

// ok reports whether every bound and invariant held.
func (r *report) ok() bool {
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

// verdict is PASS or FAIL.
func (r *report) verdict() string {
	if r.ok() {
		return "PASS"
	}
	return "FAIL"
}

// markdown renders the "## Latest run" section.
func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("## Latest run\n\n")
	fmt.Fprintf(&b, "**%s** — `%s`, started %s; warm-up %s, measured run %s, samples every %s.\n\n",
		r.verdict(), r.Command, r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Warmup, r.Duration, r.Sample)
	m := r.Machine
	dirty := ""
	if m.CommitDirty {
		dirty = " (tree modified)"
	}
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s, %d MiB; %s; lockproxy %s%s; load average %s at the start, %s at the end.\n",
		m.NProc, orDash(m.CPUModel), m.MemTotalMB, orDash(m.GoVersion), orDash(shortCommit(m.Commit)), dirty, orDash(m.LoadAvgStart), orDash(m.LoadAvgEnd))
	fmt.Fprintf(&b, "During the measured run the host was %.0f%% busy on average", 100*r.HostBusy)
	for i, c := range r.ProxyCPU {
		fmt.Fprintf(&b, "; instance %d used %.0f%% of a core", i, c)
	}
	if r.PrimaryCPU > 0 {
		fmt.Fprintf(&b, ", the primary mysqld %.0f%%", r.PrimaryCPU)
	}
	b.WriteString(".\n\n")

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
		fmt.Fprintf(&b, "| %s (%s) | %d | %s | %s | %s | %s |\n", x.Metric, x.State, x.Instance,
			formatValue(x.Metric, x.Start), formatValue(x.Metric, x.End), bound, ok)
	}

	b.WriteString("\n### Invariants\n\n| invariant | value | ok |\n|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, c.Value, yesNo(c.OK))
	}

	b.WriteString("\n### Workload (warm-up and measured run)\n\n| statements / operations | count |\n|---|---|\n")
	var total int64
	for _, k := range sortedKeys(r.Stmts) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, r.Stmts[k])
		total += r.Stmts[k]
	}
	fmt.Fprintf(&b, "| **total** | **%d** |\n", total)

	b.WriteString("\n| error | count | expected | first message |\n|---|---|---|---|\n")
	if len(r.Errs) == 0 {
		b.WriteString("| none | 0 | | |\n")
	}
	for _, k := range sortedKeys(r.Errs) {
		exp := "no"
		if expectedErrors[k] {
			exp = "yes (contention)"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", k, r.Errs[k], exp, cell(r.Msgs[k]))
	}

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

// latestHeading starts the generated section of the -out file.
const latestHeading = "## Latest run"

// replaceLatest returns doc with its "## Latest run" section (from that
// heading line to the end of the file) replaced by section; without one,
// section is appended.
func replaceLatest(doc, section string) string {
	off := 0
	for _, line := range strings.SplitAfter(doc, "\n") {
		if strings.TrimRight(line, " \r\n") == latestHeading {
			return doc[:off] + section
		}
		off += len(line)
	}
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	if doc != "" {
		doc += "\n"
	}
	return doc + section
}

// writeLatest rewrites path's "## Latest run" section, keeping what is
// above it; a missing file is created with only the section.
func writeLatest(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(path, []byte(replaceLatest(string(old), section)), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
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
