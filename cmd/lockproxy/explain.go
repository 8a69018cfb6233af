package main

import (
	"flag"
	"fmt"
	"io"
)

// explain prints what lockproxy would do with a statement.
func explain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproxy explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("config", "rules.yaml", "path to rules.yaml")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, `usage: lockproxy explain --config rules.yaml "SQL"`)
		return 2
	}
	fmt.Fprintln(stderr, "lockproxy: explain is not available in this build")
	return 1
}
