package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// options are the command line.
type options struct {
	dsn, primary, admin, outDir, examples string
	workers, keys                         int
	phase, hold                           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", "", "DSN of the lockproxy (database included) the workload runs through")
	flag.StringVar(&o.primary, "primary", "", "DSN of the primary (database included), to create the table directly")
	flag.StringVar(&o.admin, "admin", "http://127.0.0.1:9104", "lockproxy admin base URL")
	flag.StringVar(&o.outDir, "out", "docs/img", "directory for lock-wait-quantiles.png and .csv")
	flag.StringVar(&o.examples, "examples", "docs/examples", "directory for the captured example outputs")
	flag.IntVar(&o.workers, "workers", 16, "concurrent sessions")
	flag.IntVar(&o.keys, "keys", 100, "rows in the table; the calm phases spread over all of them")
	flag.DurationVar(&o.phase, "phase", 10*time.Second, "length of each of the three phases: calm, one hot row, calm")
	flag.DurationVar(&o.hold, "hold", 20*time.Millisecond, "time a transaction holds its row (the application's work)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "waitplot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.dsn == "" || o.primary == "" {
		return fmt.Errorf("-dsn and -primary are required")
	}
	if err := setup(ctx, o.primary, o.keys); err != nil {
		return err
	}
	db, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(o.workers + 2)
	for _, d := range []string{o.outDir, o.examples} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	wl := startWorkload(ctx, db, o, start)
	samples, err := scrapeUntil(ctx, o, db, start, start.Add(3*o.phase))
	stats := wl.stop()
	_ = db.Close()
	if err != nil {
		return err
	}
	fmt.Printf("workload: %s\n", stats)
	if err := settle(ctx, o.admin+"/metrics", 15*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "waitplot: warning:", err)
	}
	if err := saveMetricsExcerpt(o); err != nil {
		return err
	}
	series := quantileSeries(samples, start)
	if err := writeCSV(filepath.Join(o.outDir, "lock-wait-quantiles.csv"), series); err != nil {
		return err
	}
	return plotQuantiles(filepath.Join(o.outDir, "lock-wait-quantiles.png"), series, o.phase)
}
