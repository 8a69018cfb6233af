package gobench

import (
	"sort"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Standard units of a benchmark line.
const (
	UnitNs     = "ns/op"
	UnitBytes  = "B/op"
	UnitAllocs = "allocs/op"
)

// Invocation is one `go test` child process: one package, one round.
type Invocation struct {
	Round    int      `json:"round"`
	Pkg      string   `json:"pkg"` // as given to go test, e.g. ./parser/
	Args     []string `json:"args"`
	Attempts int      `json:"attempts"` // > 1 when a build failure was retried
	Seconds  float64  `json:"seconds"`
	OK       bool     `json:"ok"`
	// Error is the failure and the tail of the output when !OK (or when an
	// earlier attempt failed to build).
	Error    string   `json:"error,omitempty"`
	LoadAvg  string   `json:"loadavg_start"`
	HostBusy float64  `json:"host_busy"` // share of all CPUs busy during the process
	Lines    []Line   `json:"lines"`
	Ended    []Status `json:"ended,omitempty"`
}

// Bench is one benchmark's figures, medians over the rounds that produced a
// result line.
type Bench struct {
	Group string `json:"group"` // parser, rules, lock
	Pkg   string `json:"pkg"`
	Name  string `json:"name"`
	Runs  int    `json:"runs"`
	// Median is the median of each metric over the runs; NsMin and NsMax
	// bound ns/op.
	Median map[string]float64 `json:"median,omitempty"`
	NsMin  float64            `json:"ns_min,omitempty"`
	NsMax  float64            `json:"ns_max,omitempty"`
	// Missing says why there is no figure (skipped, failed, not built).
	Missing string `json:"missing,omitempty"`
}

// Ns is the median ns/op, 0 when missing.
func (b Bench) Ns() float64 { return b.Median[UnitNs] }

// Data is the stored result.
type Data struct {
	Benchtime   string       `json:"benchtime"`
	Rounds      int          `json:"rounds"` // -count 1 per round, rounds interleaved over packages
	Testbed     string       `json:"testbed"`
	Invocations []Invocation `json:"invocations"`
	Benches     []Bench      `json:"benches"`
}

// Find returns the benchmark name of package pkg.
func (d Data) Find(pkg, name string) (Bench, bool) {
	for _, b := range d.Benches {
		if b.Pkg == pkg && b.Name == name {
			return b, true
		}
	}
	return Bench{}, false
}

// Aggregate turns the invocations into one Bench per wanted benchmark, in
// the order of specs, with medians over every line it printed. A wanted
// benchmark that runs sub-benchmarks (b.Run) gives one Bench per
// sub-benchmark, named "BenchmarkX/sub", in the order they first ran.
func Aggregate(specs []Spec, invs []Invocation) []Bench {
	var out []Bench
	for _, s := range specs {
		for _, name := range s.Benches {
			for _, full := range resultNames(s.Pkg, name, invs) {
				out = append(out, aggregateOne(s, full, invs))
			}
		}
	}
	return out
}

// resultNames lists name and its sub-benchmarks as they appear in the
// result lines of pkg; just name when there is none.
func resultNames(pkg, name string, invs []Invocation) []string {
	var out []string
	seen := map[string]bool{}
	for _, inv := range invs {
		for _, l := range inv.Lines {
			if inv.Pkg == pkg && !seen[l.Name] && (l.Name == name || strings.HasPrefix(l.Name, name+"/")) {
				seen[l.Name] = true
				out = append(out, l.Name)
			}
		}
	}
	if len(out) == 0 {
		return []string{name}
	}
	return out
}

func aggregateOne(s Spec, name string, invs []Invocation) Bench {
	b := Bench{Group: s.Group, Pkg: s.Pkg, Name: name}
	per := map[string][]float64{}
	var why string
	for _, inv := range invs {
		if inv.Pkg != s.Pkg {
			continue
		}
		for _, l := range inv.Lines {
			if l.Name != name {
				continue
			}
			b.Runs++
			for unit, v := range l.Metrics {
				per[unit] = append(per[unit], v)
			}
		}
		for _, e := range inv.Ended {
			if (e.Name == name || strings.HasPrefix(name, e.Name+"/")) && why == "" {
				why = e.Result + ": " + firstLine(e.Log)
			}
		}
		if !inv.OK && why == "" {
			why = "FAIL: " + firstLine(inv.Error)
		}
	}
	if b.Runs == 0 {
		if why == "" {
			why = "no result line"
		}
		b.Missing = why
		return b
	}
	b.Median = map[string]float64{}
	for unit, vs := range per {
		b.Median[unit] = results.Median(vs)
	}
	ns := append([]float64(nil), per[UnitNs]...)
	sort.Float64s(ns)
	if len(ns) > 0 {
		b.NsMin, b.NsMax = ns[0], ns[len(ns)-1]
	}
	return b
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
