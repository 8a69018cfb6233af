// Package sqlcorpus reads the statement corpus the parser's golden test,
// its fuzz seeds and the rules' shape test share (parser/testdata/corpus.sql).
package sqlcorpus

import (
	"bufio"
	"os"
	"strings"
)

// Case is one statement of the corpus and the current database it is
// analysed under.
type Case struct {
	SQL, DB string
}

// Read reads a corpus file: one statement per line, analysed under the
// current database set by the last "@db=" line ("shop" at first); blank
// lines and lines starting with // are skipped.
func Read(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cases []Case
	db := "shop"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "", strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "@db="):
			db = strings.TrimPrefix(line, "@db=")
		default:
			cases = append(cases, Case{SQL: line, DB: db})
		}
	}
	return cases, sc.Err()
}
