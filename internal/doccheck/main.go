// Command doccheck reports doc comments that do not start with the name of
// what they document, as Go's doc conventions ask ("Locker grants ...",
// "newLocker builds ..."): a comment that names something else is usually
// one the code outgrew. It checks every top-level function, method, type,
// constant and variable, exported or not, in the .go files under the
// directories given (default "."), skipping testdata, vendor and
// third_party (code copied from elsewhere), hidden directories
// and generated files. `make lint` runs it:
//
//	go run ./internal/doccheck [-exported] [DIR ...]
//
// A comment may also start with "A", "An" or "The" before the name, or
// with "Deprecated:". A comment on a parenthesised group of declarations
// describes the group and is not checked; the comments of its members are.
// It prints one line per problem (file:line: ...) and exits 1 if there
// were any.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	exported := flag.Bool("exported", false, "check only the doc comments of exported names")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	os.Exit(run(dirs, *exported, os.Stdout, os.Stderr))
}

// run checks dirs and reports to stdout; it returns the exit status.
func run(dirs []string, exportedOnly bool, stdout, stderr io.Writer) int {
	n := 0
	for _, dir := range dirs {
		problems, err := checkTree(dir, exportedOnly)
		if err != nil {
			fmt.Fprintln(stderr, "doccheck:", err)
			return 2
		}
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
		n += len(problems)
	}
	if n > 0 {
		fmt.Fprintf(stderr, "doccheck: %d doc comments do not start with the name they document\n", n)
		return 1
	}
	return 0
}
