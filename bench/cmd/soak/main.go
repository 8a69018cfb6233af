// Command soak runs a long mixed workload through two lockproxy instances
// and fails when their goroutines, open file descriptors or memory grow
// beyond stated bounds, or when the data shows an oversold item, a lost
// update or a lock left behind.
//
//	go run ./bench/cmd/soak                  30 minutes after a 2-minute warm-up (make soak)
//	go run ./bench/cmd/soak -duration 5m     a short try
//
// It builds lockproxy from the checkout (or takes -lockproxy), starts a
// private test bed (or reuses -bed DIR), writes the series as CSV and the
// report into the "## Latest run" section of bench/SOAK.md, and exits 1 when
// a bound or an invariant fails. It never imports lockproxy's packages.
//
// This file is the command line and the wiring; the run is package
// bench/internal/soak and its parts are the packages under it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/soak"
	"github.com/lockproxy/lockproxy/bench/internal/soak/soakreport"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	duration time.Duration
	warmup   time.Duration
	sample   time.Duration
	bed      string
	binary   string
	out      string
	csv      string
	keep     bool
}

// parseFlags reads the command line; -h gives flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&f.duration, "duration", 30*time.Minute, "length of the measured run")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Minute, "workload before the start snapshot")
	fs.DurationVar(&f.sample, "sample", 10*time.Second, "interval between /metrics samples")
	fs.StringVar(&f.bed, "bed", "", "reuse the test bed running in this directory (default: start a private one and stop it after)")
	fs.StringVar(&f.binary, "lockproxy", "", "use this lockproxy binary instead of building ./cmd/lockproxy")
	fs.StringVar(&f.out, "out", "", `report file whose "## Latest run" section is rewritten (default: <repo>/bench/SOAK.md)`)
	fs.StringVar(&f.csv, "csv", "", "series file (default: <repo>/bench/results/soak.csv with the default -out, else -out with .csv)")
	fs.BoolVar(&f.keep, "keep", false, "keep the scratch directory (each instance's rules.yaml and log)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("soak: unexpected arguments %q", fs.Args())
	}
	if f.duration <= 0 || f.warmup <= 0 || f.sample <= 0 {
		return f, errors.New("soak: -duration, -warmup and -sample must be positive")
	}
	return f, nil
}

// outputs resolves the report and CSV paths.
func outputs(root string, f flags) (out, csv string) {
	out, csv = f.out, f.csv
	if out == "" {
		out = filepath.Join(root, "bench", "SOAK.md")
		if csv == "" {
			csv = filepath.Join(root, "bench", "results", "soak.csv")
		}
	}
	if csv == "" {
		csv = strings.TrimSuffix(out, filepath.Ext(out)) + ".csv"
	}
	return out, csv
}

// run is the command: 0 when the soak passed, 1 when it failed or could
// not run, 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	logger := log.New(stderr, "", log.Ltime)
	_ = mysql.SetLogger(driverLog{logger})
	root, err := env.RepoRoot()
	if err != nil {
		logger.Printf("%s: %v", "soak", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out, csv := outputs(root, f)
	rep, err := soak.Run(ctx, soak.Options{
		Root: root, Command: strings.TrimSpace("go run ./bench/cmd/soak " + strings.Join(args, " ")),
		Warmup: f.warmup, Duration: f.duration, Sample: f.sample,
		Bed: f.bed, Binary: f.binary, Keep: f.keep, CSV: csv, Log: logger,
	})
	if err != nil {
		logger.Printf("soak: %v", err)
		return 1
	}
	section := rep.Markdown()
	fmt.Fprintln(stdout, section)
	if err := soakreport.WriteLatest(out, section); err != nil {
		logger.Printf("soak: %v", err)
		return 1
	}
	logger.Printf("soak: %s; report in %s, series in %s", rep.Verdict(), out, rep.CSV)
	if !rep.OK() {
		return 1
	}
	return 0
}

// driverLog passes the MySQL driver's log on, without the lines every
// deliberately dropped connection causes.
type driverLog struct{ l *log.Logger }

// Print implements mysql.Logger.
func (d driverLog) Print(v ...any) {
	msg := fmt.Sprint(v...)
	if strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "connection reset by peer") {
		return
	}
	d.l.Print("soak: mysql driver: " + msg)
}
