package idleconn

import (
	"fmt"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Mem is one reading of lockproxy's memory: VmRSS from /proc, the rest
// from the Go runtime through /metrics. Bytes.
type Mem struct {
	RSS        uint64 `json:"rss"`
	HeapInuse  uint64 `json:"heap_inuse"`
	StackInuse uint64 `json:"stack_inuse"`
	Goroutines int    `json:"goroutines"`
}

// Run is one round: a fresh lockproxy, Conns connections opened, read,
// closed, read again at each of Data.AfterCloseSeconds.
type Run struct {
	Round int `json:"round"`
	// Multiplex: the instance had backends.pool.multiplex on, so an idle
	// session holds no primary connection.
	Multiplex      bool    `json:"multiplex,omitempty"`
	Conns          int     `json:"conns"`
	ConnectSeconds float64 `json:"connect_seconds"`
	Base           Mem     `json:"base"`
	Open           Mem     `json:"open"`
	Collected      Mem     `json:"collected"` // open, after a garbage collection
	Closed         []Mem   `json:"closed"`
	// Per open connection, from Open − Base.
	RSSPerConn        float64 `json:"rss_per_conn"`
	HeapPerConn       float64 `json:"heap_per_conn"`
	StackPerConn      float64 `json:"stack_per_conn"`
	GoroutinesPerConn float64 `json:"goroutines_per_conn"`
	// Per open connection after a collection, from Collected − Base.
	CollectedRSSPerConn   float64 `json:"collected_rss_per_conn"`
	CollectedHeapPerConn  float64 `json:"collected_heap_per_conn"`
	CollectedStackPerConn float64 `json:"collected_stack_per_conn"`
	// KeptShare is (last Closed − Base) / (Open − Base) of RSS.
	KeptShare float64 `json:"kept_share"`
}

func (r *Run) summarize() {
	n := float64(r.Conns)
	r.RSSPerConn = (float64(r.Open.RSS) - float64(r.Base.RSS)) / n
	r.HeapPerConn = (float64(r.Open.HeapInuse) - float64(r.Base.HeapInuse)) / n
	r.StackPerConn = (float64(r.Open.StackInuse) - float64(r.Base.StackInuse)) / n
	r.GoroutinesPerConn = float64(r.Open.Goroutines-r.Base.Goroutines) / n
	r.CollectedRSSPerConn = (float64(r.Collected.RSS) - float64(r.Base.RSS)) / n
	r.CollectedHeapPerConn = (float64(r.Collected.HeapInuse) - float64(r.Base.HeapInuse)) / n
	r.CollectedStackPerConn = (float64(r.Collected.StackInuse) - float64(r.Base.StackInuse)) / n
	if grown := float64(r.Open.RSS) - float64(r.Base.RSS); grown > 0 && len(r.Closed) > 0 {
		r.KeptShare = (float64(r.Closed[len(r.Closed)-1].RSS) - float64(r.Base.RSS)) / grown
	}
}

func (r Run) String() string {
	s := fmt.Sprintf("round %d (%s): %d connections in %.1f s; RSS %.1f -> %.1f MiB (%.1f KiB/conn: heap %.1f, stacks %.1f, %.1f goroutines/conn)",
		r.Round, r.mode(), r.Conns, r.ConnectSeconds, mib(r.Base.RSS), mib(r.Open.RSS), r.RSSPerConn/1024, r.HeapPerConn/1024, r.StackPerConn/1024, r.GoroutinesPerConn)
	s += fmt.Sprintf("; after two collections %.1f KiB/conn (heap %.1f, stacks %.1f)", r.CollectedRSSPerConn/1024, r.CollectedHeapPerConn/1024, r.CollectedStackPerConn/1024)
	for _, c := range r.Closed {
		s += fmt.Sprintf("; closed: %.1f MiB", mib(c.RSS))
	}
	return s
}

func (r Run) mode() string {
	if r.Multiplex {
		return "multiplexed"
	}
	return "pinned"
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// Data is the idleconn scenario's result data.
type Data struct {
	Conns             int       `json:"conns"`
	SettleSeconds     float64   `json:"settle_seconds"`
	AfterCloseSeconds []float64 `json:"after_close_seconds"`
	Runs              []Run     `json:"runs"`
	// Summary is the pinned runs' medians (its fields stand at the top
	// level of the JSON, as before there were multiplexed runs).
	Summary
	// Multiplexed holds the same figures for the runs with multiplexing
	// on; nil in results from before those runs.
	Multiplexed *Summary `json:"multiplexed,omitempty"`
}

// Summary is the medians over a set of runs (bytes per connection) and
// their worst kept share.
type Summary struct {
	RSSPerConn            float64 `json:"rss_per_conn"`
	HeapPerConn           float64 `json:"heap_per_conn"`
	StackPerConn          float64 `json:"stack_per_conn"`
	WorstKept             float64 `json:"worst_kept_share"`
	CollectedRSSPerConn   float64 `json:"collected_rss_per_conn"`
	CollectedHeapPerConn  float64 `json:"collected_heap_per_conn"`
	CollectedStackPerConn float64 `json:"collected_stack_per_conn"`
}

func summarize(runs []Run) Summary {
	var rss, heap, stack, crss, cheap, cstack []float64
	var s Summary
	for _, r := range runs {
		rss, heap, stack = append(rss, r.RSSPerConn), append(heap, r.HeapPerConn), append(stack, r.StackPerConn)
		crss, cheap, cstack = append(crss, r.CollectedRSSPerConn), append(cheap, r.CollectedHeapPerConn), append(cstack, r.CollectedStackPerConn)
		s.WorstKept = max(s.WorstKept, r.KeptShare)
	}
	s.RSSPerConn, s.HeapPerConn, s.StackPerConn = results.Median(rss), results.Median(heap), results.Median(stack)
	s.CollectedRSSPerConn, s.CollectedHeapPerConn, s.CollectedStackPerConn = results.Median(crss), results.Median(cheap), results.Median(cstack)
	return s
}

func (d *Data) summarize() {
	var pinned, mux []Run
	for _, r := range d.Runs {
		if r.Multiplex {
			mux = append(mux, r)
		} else {
			pinned = append(pinned, r)
		}
	}
	d.Summary = summarize(pinned)
	if len(mux) > 0 {
		m := summarize(mux)
		d.Multiplexed = &m
	}
}

func (d Data) targets() []results.Target {
	last := 0.0
	if len(d.AfterCloseSeconds) > 0 {
		last = d.AfterCloseSeconds[len(d.AfterCloseSeconds)-1]
	}
	out := []results.Target{
		{Name: fmt.Sprintf("lockproxy RSS per idle authenticated connection (%d connections, median)", d.Conns),
			Want: fmt.Sprintf("≤ %.0f KiB", TargetPerConnKiB), Got: fmt.Sprintf("%.1f KiB", d.RSSPerConn/1024), Met: d.RSSPerConn/1024 <= TargetPerConnKiB},
	}
	worst := d.WorstKept
	if m := d.Multiplexed; m != nil {
		out = append(out, results.Target{Name: fmt.Sprintf("the same with multiplexing on (%d connections, median)", d.Conns),
			Want: fmt.Sprintf("≤ %.0f KiB", TargetPerConnKiB), Got: fmt.Sprintf("%.1f KiB", m.RSSPerConn/1024), Met: m.RSSPerConn/1024 <= TargetPerConnKiB})
		worst = max(worst, m.WorstKept)
	}
	return append(out, results.Target{Name: fmt.Sprintf("RSS the connections took still held %.0f s after they all closed (worst run)", last),
		Want: fmt.Sprintf("≤ %.0f%%", 100*TargetKeptShare), Got: fmt.Sprintf("%.0f%%", 100*worst), Met: worst <= TargetKeptShare})
}
