// Command hostile runs every known attack on one lockproxy at once, for a
// set time, while a flash sale runs through it, and fails unless the
// proxy came through:
//
//	go run ./bench/cmd/hostile                    10 minutes (make hostile)
//	go run ./bench/cmd/hostile -duration 1m       a short try
//
// The attacks: connections announcing 16 MiB handshake packets; a flood of
// idle sockets that never log in; deeply nested and oversized statements;
// long data for parameters that do not exist; many open prepared UPDATEs
// with long texts; parallel password guesses for the real account and one
// password sprayed over many names (from other loopback addresses, as
// other hosts would); arbitrary command packets after login; a user
// without the PROCESS privilege reading SHOW LOCKPROXY LOCKS.
//
// It asserts: the proxy's RSS stays under -rss-limit; its log holds no
// panic; the flash sale ends correct (no item oversold, no update lost);
// a legitimate login succeeds every second; the unprivileged user never
// sees a buyer's literal. lockproxy runs with -nofile descriptors (ulimit
// -n) so that running out of them is part of the test. It builds lockproxy
// from the checkout (or takes -lockproxy), starts a private test bed (or
// reuses -bed DIR), and never imports lockproxy's packages.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	duration time.Duration
	rssLimit uint64 // MiB
	nofile   int
	bed      string
	binary   string
	keep     bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&f.duration, "duration", 10*time.Minute, "how long the attacks and the flash sale run")
	fs.Uint64Var(&f.rssLimit, "rss-limit", 1024, "the RSS (MiB) lockproxy must stay under")
	fs.IntVar(&f.nofile, "nofile", 1024, "lockproxy's file descriptor limit (ulimit -n)")
	fs.StringVar(&f.bed, "bed", "", "reuse the test bed running in this directory (default: start a private one)")
	fs.StringVar(&f.binary, "lockproxy", "", "a lockproxy binary (default: go build ./cmd/lockproxy)")
	fs.BoolVar(&f.keep, "keep", false, "keep the scratch directory (config, log)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lg := log.New(stderr, "", log.LstdFlags)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := findRoot()
	if err != nil {
		lg.Print(err)
		return 2
	}
	e, cleanup, err := env.Setup(ctx, env.SetupOptions{Root: root, Name: "hostile", Binary: f.binary, Bed: f.bed, Keep: f.keep, Log: lg})
	if err != nil {
		lg.Print(err)
		return 1
	}
	defer cleanup()
	rep, err := attack(ctx, e, f, lg)
	if err != nil {
		lg.Printf("hostile: %v", err)
		return 1
	}
	fmt.Fprint(stdout, rep.String())
	if !rep.ok() {
		return 1
	}
	return 0
}

// findRoot walks up from the working directory to the lockproxy checkout.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && len(b) > 0 &&
			containsModule(string(b)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", env.ErrNoRoot
		}
		dir = parent
	}
}

func containsModule(gomod string) bool {
	const want = "module github.com/lockproxy/lockproxy\n"
	return len(gomod) >= len(want) && gomod[:len(want)] == want
}
