package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// ErrUnknown is returned for a scenario name nobody registered.
var ErrUnknown = errors.New("scenario: unknown")

// Options are the run-wide settings every scenario honours.
type Options struct {
	// Quick asks for a run of a few minutes at most: fewer rounds, shorter
	// runs. The figures are noisier; the shape of the run is the same.
	Quick bool
}

// Mode names the options for the results file: "quick" or "full".
func (o Options) Mode() string {
	if o.Quick {
		return "quick"
	}
	return "full"
}

// Scenario is one benchmark. Run is called once per bench invocation and may
// start bed-side state (tables, lockproxy instances) that it must clean up
// before returning. Report turns a stored result back into Markdown; it must
// work from the JSON alone (results of earlier runs are re-rendered), and may
// write charts into plotDir, linking them relative to relDir.
type Scenario interface {
	Name() string
	// Summary is one line for `bench -list` and the report.
	Summary() string
	// Run measures and fills r.Targets and r.Data (r already carries the
	// name, mode, command and machine).
	Run(ctx context.Context, e *env.Env, opts Options, r *results.Result) error
	Report(r *results.Result, plotDir, relDir string) (string, error)
}

// Registry maps names to scenarios in registration order. It is not safe
// for concurrent Register calls; lookups after registration are.
type Registry struct {
	order  []string
	byName map[string]Scenario
}

// NewRegistry registers ss in order; a duplicate name panics, as it is a
// programming error in bench/cmd/bench.
func NewRegistry(ss ...Scenario) *Registry {
	r := &Registry{byName: map[string]Scenario{}}
	for _, s := range ss {
		if _, dup := r.byName[s.Name()]; dup {
			panic("scenario: registered twice: " + s.Name())
		}
		r.byName[s.Name()] = s
		r.order = append(r.order, s.Name())
	}
	return r
}

// All returns every scenario in registration order.
func (r *Registry) All() []Scenario {
	out := make([]Scenario, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.byName[n])
	}
	return out
}

// Get returns the scenario called name.
func (r *Registry) Get(name string) (Scenario, bool) {
	s, ok := r.byName[name]
	return s, ok
}

// Select resolves a comma-separated list ("" or "all" means every scenario),
// keeping registration order and dropping duplicates.
func (r *Registry) Select(list string) ([]Scenario, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return r.All(), nil
	}
	want := map[string]bool{}
	var unknown []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := r.byName[n]; !ok {
			unknown = append(unknown, n)
		}
		want[n] = true
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: %s (have: %s)", ErrUnknown, strings.Join(unknown, ", "), strings.Join(r.order, ", "))
	}
	var out []Scenario
	for _, n := range r.order {
		if want[n] {
			out = append(out, r.byName[n])
		}
	}
	return out, nil
}
