package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
)

// explain prints what lockproxy would do with a statement. It reads no
// server: key columns normalise by their literal form.
func explain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproxy explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "rules.yaml", "path to rules.yaml")
	db := fs.String("db", "", "the session's current database")
	inTxn := fs.Bool("in-txn", false, "explain as inside a transaction (BEGIN or autocommit=0)")
	old := fs.String("old", "", "for an UPDATE under a rewrite rule: the value the session read for the row")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, `usage: lockproxy explain --config rules.yaml [--db shop] [--in-txn] [--old 17] "SQL"`)
		return 2
	}
	cfg, err := rules.Load(*configPath)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	rs, err := rules.Compile(cfg, rules.Schema{})
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	var oldValue []byte
	if *old != "" {
		oldValue = []byte(*old)
	}
	e, err := proxy.Explain(rs, fs.Arg(0), *db, *inTxn, len(cfg.Backends.Replicas) > 0, oldValue)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	e.Print(stdout)
	return 0
}
