package main

import (
	"context"
	"log"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/report"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

// paths are where results and the report go.
type paths struct {
	results, report string
}

func resolvePaths(root string, f flags) paths {
	p := paths{results: f.resultDir, report: f.out}
	if p.results == "" {
		p.results = filepath.Join(root, "bench", "results")
	}
	if p.report == "" {
		p.report = filepath.Join(root, "bench", "RESULTS.md")
	}
	return p
}

func writeReport(p paths, reg *scenario.Registry, logger *log.Logger) error {
	rs, err := results.LoadAll(p.results)
	if err == nil {
		err = report.Write(p.report, p.results, rs, reg)
	}
	if err != nil {
		logger.Printf("bench: report: %v", err)
		return err
	}
	logger.Printf("bench: wrote %s from %d result(s)", p.report, len(rs))
	return nil
}

// runner runs the selected scenarios in one environment.
type runner struct {
	root  string
	flags flags
	paths paths
	log   *log.Logger
	args  []string
}

// runAll sets up the environment, runs each scenario, saves each result and
// returns how many failed. A failed scenario does not stop the others.
func (r *runner) runAll(ctx context.Context, selected []scenario.Scenario) int {
	e, cleanup, err := r.setup(ctx)
	if err != nil {
		r.log.Printf("bench: %v", err)
		return len(selected)
	}
	defer cleanup()
	machine := r.machine(ctx, e)
	opts := scenario.Options{Quick: r.flags.quick}
	failed := 0
	for _, s := range selected {
		if ctx.Err() != nil {
			return failed + 1
		}
		res := &results.Result{
			Scenario: s.Name(), Mode: opts.Mode(), Started: time.Now().UTC(), Machine: machine,
			Command: strings.TrimSpace("go run ./bench/cmd/bench " + strings.Join(r.args, " ")),
		}
		r.log.Printf("bench: %s (%s) starting", s.Name(), opts.Mode())
		if err := s.Run(ctx, e, opts, res); err != nil {
			r.log.Printf("bench: %s failed: %v", s.Name(), err)
			failed++
			continue
		}
		res.Finished = time.Now().UTC()
		res.Machine.LoadAvgEnd = results.LoadAvg()
		if err := results.Save(r.paths.results, res); err != nil {
			r.log.Printf("bench: %v", err)
			failed++
			continue
		}
		r.log.Printf("bench: %s done in %s", s.Name(), res.Finished.Sub(res.Started).Round(time.Second))
	}
	return failed
}

// setup builds (or takes) the lockproxy binary, builds the bare Go relay
// and starts (or reuses) the bed; see env.Setup.
func (r *runner) setup(ctx context.Context) (*env.Env, func(), error) {
	return env.Setup(ctx, env.SetupOptions{Root: r.root, Name: "bench", Binary: r.flags.binary, Relay: true,
		Bed: r.flags.bed, Keep: r.flags.keep, Log: r.log})
}

// machine describes this host and the bed's servers.
func (r *runner) machine(ctx context.Context, e *env.Env) results.Machine {
	m := results.LocalMachine(ctx, r.root)
	if r.flags.binary != "" {
		m.Binary = r.flags.binary
	}
	v, err := mariadbVersion(ctx, e)
	if err != nil {
		r.log.Printf("bench: MariaDB version: %v", err)
	}
	m.MariaDB = v
	if m.Redis, err = redisVersion(ctx, e.Bed.Redis); err != nil {
		r.log.Printf("bench: Redis version: %v", err)
	}
	return m
}
