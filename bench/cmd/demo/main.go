// Command demo is `make demo`: the flash sale of the seeds (many buyers
// run the unsafe read-then-write, BEGIN; SELECT stock; UPDATE sku_stock SET
// stock = <what was read> - 1; INSERT an order; COMMIT, with no FOR
// UPDATE) run directly against MariaDB and then through two lockproxy
// instances sharing the bed's Redis, on the bed of `make run` (.testbed,
// started if it is not running). It prints side by side what each did:
// orders taken, stock left, oversold units and lost updates, and the lock
// waits the two instances' metrics show. It exits 1 when a sale through
// lockproxy oversold or lost an update.
//
//	go run ./bench/cmd/demo -lockproxy bin/lockproxy     (make demo)
//
// It works in a database of its own (lockproxy_demo) and leaves the bed
// running. It never imports lockproxy's packages.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line.
type options struct {
	buyers, stock int
	bin, bed      string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.buyers, "buyers", 200, "buyers, each trying to buy one unit")
	fs.IntVar(&o.stock, "stock", 50, "units in stock when the sale starts")
	fs.StringVar(&o.bin, "lockproxy", "", "a built lockproxy binary (default: build one)")
	fs.StringVar(&o.bed, "bed", ".testbed", "the test bed directory, relative to the checkout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.buyers < 1 || o.stock < 1 {
		fmt.Fprintln(stderr, "demo: -buyers and -stock must be at least 1")
		return 2
	}
	logger := log.New(stderr, "", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sales, err := demo(ctx, o, logger)
	if err != nil {
		logger.Printf("demo: %v", err)
		return 1
	}
	fmt.Fprint(stdout, report(o, sales))
	if via := sales[1]; via.oversold() > 0 || via.lost() > 0 {
		return 1
	}
	return 0
}

// demo sets up the database and the two instances and runs both sales.
func demo(ctx context.Context, o options, logger *log.Logger) ([2]sale, error) {
	var out [2]sale
	root, err := env.RepoRoot()
	if err != nil {
		return out, err
	}
	if o.bin != "" && !filepath.IsAbs(o.bin) {
		o.bin = filepath.Join(root, o.bin)
	}
	if !filepath.IsAbs(o.bed) {
		o.bed = filepath.Join(root, o.bed)
	}
	e, cleanup, err := env.Setup(ctx, env.SetupOptions{Root: root, Name: "demo", Binary: o.bin, Bed: o.bed, Log: logger})
	if err != nil {
		return out, err
	}
	defer cleanup()
	const db = "lockproxy_demo"
	setup, err := contend.Fresh(ctx, e, db)
	if err != nil {
		return out, err
	}
	defer setup.Close()
	logger.Printf("demo: two lockproxy instances, locks in Redis %s", e.Bed.Redis)
	ps, err := e.StartProxies(ctx, 2, env.ProxyConfig{Locks: contend.RedisLocks(e.Bed.Redis),
		Rules: contend.LockRule(db, "write, locking_read, read_in_txn")})
	if err != nil {
		return out, err
	}
	defer func() { _ = env.StopAll(context.Background(), ps) }()
	logger.Printf("demo: %d buyers, %d in stock, directly against MariaDB", o.buyers, o.stock)
	if out[0], err = runSale(ctx, e, setup, o, []string{e.Bed.Primary}, nil); err != nil {
		return out, err
	}
	logger.Printf("demo: the same sale through both instances")
	out[1], err = runSale(ctx, e, setup, o, []string{ps[0].Addr, ps[1].Addr}, ps)
	return out, err
}

// sale is what one run of the flash sale did.
type sale struct {
	run     contend.Run
	initial int64
	state   contend.State
	locks   contend.LockMetrics // nil ps: none
	proxied bool
}

func (s sale) oversold() int64 { return contend.Oversold(s.initial, s.state.Orders) }
func (s sale) lost() int64     { return contend.Lost(s.initial, s.state.Stock, s.state.Orders) }

// runSale resets the stock and lets the buyers buy through addrs (buyer i
// through addrs[i%len]), retrying 1205/1213 as the seeds' code is told to.
func runSale(ctx context.Context, e *env.Env, setup *sql.DB, o options, addrs []string, ps []*env.Proxy) (sale, error) {
	s := sale{initial: int64(o.stock), proxied: ps != nil}
	if err := contend.Reset(ctx, setup, 1, int64(o.stock)); err != nil {
		return s, err
	}
	pools, closeAll, err := contend.Handles(ctx, e, addrs, "lockproxy_demo", o.buyers)
	if err != nil {
		return s, err
	}
	defer closeAll()
	var before contend.LockMetrics
	if ps != nil {
		if before, err = contend.ScrapeLocks(ctx, ps); err != nil {
			return s, err
		}
	}
	s.run = contend.Sale(ctx, o.buyers, 50, contend.TxnReadWrite(pools, contend.HotKey, contend.TxnStyle{Order: true}))
	if ps != nil {
		after, err := contend.ScrapeLocks(ctx, ps)
		if err != nil {
			return s, err
		}
		s.locks = after.Sub(before)
	}
	s.state, err = contend.ReadState(ctx, setup)
	return s, err
}
