package sampling

import "strings"

// counterSeries are the lockproxy counters reported over the measured run:
// metric name and label matchers, shown as name{matchers}.
var counterSeries = []struct {
	name  string
	match []string
}{
	{"lockproxy_queries_total", []string{`route="primary"`, `kind="query"`}},
	{"lockproxy_queries_total", []string{`route="primary"`, `kind="execute"`}},
	{"lockproxy_queries_total", []string{`route="replica"`, `kind="query"`}},
	{"lockproxy_queries_total", []string{`route="replica"`, `kind="execute"`}},
	{"lockproxy_lock_acquire_total", []string{`result="acquired"`}},
	{"lockproxy_lock_acquire_total", []string{`result="timeout"`}},
	{"lockproxy_lock_acquire_total", []string{`result="deadlock"`}},
	{"lockproxy_lock_acquire_total", []string{`result="unavailable"`}},
	{"lockproxy_lock_acquire_total", []string{`result="error"`}},
	{"lockproxy_lock_lease_lost_total", nil},
	{"lockproxy_rewrites_total", []string{`result="applied"`}},
	{"lockproxy_rewrites_total", []string{`result="conflicted"`}},
	{"lockproxy_rewrites_total", []string{`result="skipped"`}},
	{"lockproxy_statements_rejected_total", nil},
	{"lockproxy_auth_failures_total", nil},
	{"lockproxy_backend_errors_total", nil},
}

// CounterRow is a lockproxy counter's increase over the measured run on
// one instance. Name is the metric with its label matchers, as
// `name{label="value",...}`.
type CounterRow struct {
	Name     string
	Instance int
	Delta    float64
}

// CounterDeltas is each reported counter's increase from the start
// samples to the end samples (one per instance, in instance order).
func CounterDeltas(start, end []Sample) []CounterRow {
	var rows []CounterRow
	for _, c := range counterSeries {
		name := c.name
		if len(c.match) > 0 {
			name += "{" + strings.Join(c.match, ",") + "}"
		}
		for i := range end {
			if i >= len(start) {
				break
			}
			rows = append(rows, CounterRow{Name: name, Instance: i,
				Delta: end[i].Full.Sum(c.name, c.match...) - start[i].Full.Sum(c.name, c.match...)})
		}
	}
	return rows
}

// CounterTotal sums the rows named name over the instances.
func CounterTotal(rows []CounterRow, name string) float64 {
	var s float64
	for _, r := range rows {
		if r.Name == name {
			s += r.Delta
		}
	}
	return s
}
