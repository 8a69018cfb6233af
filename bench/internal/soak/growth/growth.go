package growth

import (
	"fmt"
	"math"
	"strings"
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
)

// LoadedSamples is how many of a phase's last samples a loaded snapshot is
// the median of.
const LoadedSamples = 3

// States in which a snapshot is taken.
const (
	// StateIdle is every client closed and the instances drained.
	StateIdle = "idle"
	// StateLoad is the end of a phase of the workload.
	StateLoad = "under load"
)

// Bound is one growth limit: end <= start + max(Abs, Rel*start).
type Bound struct {
	Metric string // a gauge name
	State  string // StateIdle or StateLoad
	Abs    float64
	Rel    float64
}

// Bounds are the checked comparisons, in report order.
var Bounds = []Bound{
	{Metric: "go_goroutines", State: StateIdle, Abs: maxGoroutineGrowth},
	{Metric: "process_open_fds", State: StateIdle, Abs: maxFDGrowth},
	{Metric: "process_resident_memory_bytes", State: StateLoad, Abs: memGrowthAbs, Rel: memGrowthRel},
	{Metric: "go_memstats_heap_inuse_bytes", State: StateLoad, Abs: memGrowthAbs, Rel: memGrowthRel},
}

// Infos are comparisons shown for reading but not checked.
var Infos = []Bound{
	{Metric: "go_goroutines", State: StateLoad},
	{Metric: "process_open_fds", State: StateLoad},
	{Metric: "process_resident_memory_bytes", State: StateIdle},
	{Metric: "go_memstats_heap_inuse_bytes", State: StateIdle},
}

// Limit is the highest end value start allows.
func (b Bound) Limit(start float64) float64 { return start + math.Max(b.Abs, b.Rel*start) }

// Text states the bound for the report.
func (b Bound) Text() string {
	if b.Rel == 0 {
		return fmt.Sprintf("start + %s", FormatValue(b.Metric, b.Abs))
	}
	return fmt.Sprintf("start + max(%.0f%%, %s)", 100*b.Rel, FormatValue(b.Metric, b.Abs))
}

// isBytes reports whether a gauge is a byte count.
func isBytes(metric string) bool { return strings.HasSuffix(metric, "_bytes") }

// FormatValue renders v in the metric's unit: MiB for a byte count, else
// a whole number.
func FormatValue(metric string, v float64) string {
	if isBytes(metric) {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// Snapshot is one instance's gauges in one state, by gauge name.
type Snapshot map[string]float64

// Snapshots are one instance's four readings.
type Snapshots struct {
	IdleStart, IdleEnd, LoadStart, LoadEnd Snapshot
}

// pair returns the start and end snapshots of a state.
func (s Snapshots) pair(state string) (Snapshot, Snapshot) {
	if state == StateIdle {
		return s.IdleStart, s.IdleEnd
	}
	return s.LoadStart, s.LoadEnd
}

// Row is one line of the bounds table.
type Row struct {
	Metric   string
	State    string
	Instance int
	Start    float64
	End      float64
	Bound    string // "" for a reading that is not checked
	OK       bool
}

// Compare builds the bounds table rows (checked, then informational) for
// every instance, per[i] being instance i's snapshots.
func Compare(per []Snapshots) []Row {
	var rows []Row
	for _, b := range Bounds {
		for i, s := range per {
			start, end := s.pair(b.State)
			rows = append(rows, Row{Metric: b.Metric, State: b.State, Instance: i,
				Start: start[b.Metric], End: end[b.Metric], Bound: b.Text(), OK: end[b.Metric] <= b.Limit(start[b.Metric])})
		}
	}
	for _, b := range Infos {
		for i, s := range per {
			start, end := s.pair(b.State)
			rows = append(rows, Row{Metric: b.Metric, State: b.State, Instance: i,
				Start: start[b.Metric], End: end[b.Metric], OK: true})
		}
	}
	return rows
}
