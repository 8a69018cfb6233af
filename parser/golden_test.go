package parser

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproxy/lockproxy/internal/sqlcorpus"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// readCorpus reads testdata/corpus.sql (format in its header).
func readCorpus(t testing.TB) []sqlcorpus.Case {
	t.Helper()
	cases, err := sqlcorpus.Read(filepath.Join("testdata", "corpus.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestGolden analyses every corpus statement and compares the facts with
// testdata/analyze.golden.json (go test -run TestGolden -update rewrites it;
// review the diff).
func TestGolden(t *testing.T) {
	cases := readCorpus(t)
	if len(cases) < 150 {
		t.Fatalf("corpus has %d cases, want at least 150", len(cases))
	}
	var got []analysisSummary
	for _, c := range cases {
		a, err := Analyze(c.SQL, c.DB)
		if err != nil {
			t.Fatalf("Analyze(%q): %v", c.SQL, err)
		}
		got = append(got, summarize(a))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "analyze.golden.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	var wantS []analysisSummary
	if err := json.Unmarshal(want, &wantS); err != nil {
		t.Fatal(err)
	}
	if len(wantS) != len(got) {
		t.Fatalf("golden has %d cases, corpus %d: run with -update and review", len(wantS), len(got))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(wantS[i])
		t.Run(got[i].SQL, func(t *testing.T) {
			if !bytes.Equal(g, w) {
				t.Errorf("facts differ\n got: %s\nwant: %s", g, w)
			}
		})
	}
}
