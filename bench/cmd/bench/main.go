// Command bench runs lockproxy's benchmark scenarios against a private test
// bed and regenerates bench/RESULTS.md from every JSON result present.
//
//	go run ./bench/cmd/bench                     every scenario, full mode
//	go run ./bench/cmd/bench -quick              every scenario, a few minutes
//	go run ./bench/cmd/bench overhead            one scenario (or -scenario=a,b)
//	go run ./bench/cmd/bench -report             only rewrite RESULTS.md
//	go run ./bench/cmd/bench -list               list scenarios
//
// It builds lockproxy from the checkout and runs it as separate processes;
// it never imports lockproxy's packages.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lockproxy/lockproxy/bench/internal/bank"
	"github.com/lockproxy/lockproxy/bench/internal/disjoint"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/flashsale"
	"github.com/lockproxy/lockproxy/bench/internal/gobench"
	"github.com/lockproxy/lockproxy/bench/internal/hotkey"
	"github.com/lockproxy/lockproxy/bench/internal/idleconn"
	"github.com/lockproxy/lockproxy/bench/internal/manyclients"
	"github.com/lockproxy/lockproxy/bench/internal/overhead"
	"github.com/lockproxy/lockproxy/bench/internal/readwrite"
	"github.com/lockproxy/lockproxy/bench/internal/redisrtt"
	"github.com/lockproxy/lockproxy/bench/internal/rewrite"
	"github.com/lockproxy/lockproxy/bench/internal/scale"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
	"github.com/lockproxy/lockproxy/bench/internal/streaming"
)

// registry lists every scenario, in the order they run and are reported.
// A new scenario is one more argument here.
func registry() *scenario.Registry {
	return scenario.NewRegistry(
		overhead.New(),
		streaming.New(),
		flashsale.New(),
		hotkey.New(),
		rewrite.New(),
		disjoint.New(),
		scale.New(),
		bank.New(),
		redisrtt.New(),
		gobench.New(),
		idleconn.New(),
		manyclients.New(),
		readwrite.New(),
	)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	scenarios string
	quick     bool
	list      bool
	reportOnl bool
	bed       string
	binary    string
	resultDir string
	out       string
	keep      bool
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.scenarios, "scenario", "", "comma-separated scenarios to run (default: all; positional names work too)")
	fs.BoolVar(&f.quick, "quick", false, "short run: fewer rounds, shorter runs (a few minutes in all)")
	fs.BoolVar(&f.list, "list", false, "list the scenarios and exit")
	fs.BoolVar(&f.reportOnl, "report", false, "only regenerate RESULTS.md from the JSON results")
	fs.StringVar(&f.bed, "bed", "", "reuse the test bed running in this directory (default: start a private one and stop it after)")
	fs.StringVar(&f.binary, "lockproxy", "", "use this lockproxy binary instead of building ./cmd/lockproxy")
	fs.StringVar(&f.resultDir, "results", "", "results directory (default: <repo>/bench/results)")
	fs.StringVar(&f.out, "out", "", "report file (default: <repo>/bench/RESULTS.md)")
	fs.BoolVar(&f.keep, "keep", false, "keep the scratch directory (configs and lockproxy logs)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if rest := fs.Args(); len(rest) > 0 {
		f.scenarios = strings.Join(append([]string{f.scenarios}, rest...), ",")
	}
	return f, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	reg := registry()
	if f.list {
		for _, s := range reg.All() {
			fmt.Fprintf(stdout, "%-12s %s\n", s.Name(), s.Summary())
		}
		return 0
	}
	selected, err := reg.Select(strings.Trim(f.scenarios, ","))
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	logger := log.New(stderr, "", log.Ltime)
	root, err := env.RepoRoot()
	if err != nil {
		logger.Printf("%s: %v", "bench", err)
		return 1
	}
	paths := resolvePaths(root, f)
	if f.reportOnl {
		return exitCode(writeReport(paths, reg, logger))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &runner{root: root, flags: f, paths: paths, log: logger, args: args}
	failed := r.runAll(ctx, selected)
	if err := writeReport(paths, reg, logger); err != nil {
		return 1
	}
	if failed > 0 {
		logger.Printf("bench: %d scenario(s) failed", failed)
		return 1
	}
	return 0
}

func exitCode(err error) int {
	if err != nil {
		return 1
	}
	return 0
}
