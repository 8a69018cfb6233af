package report

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
	"github.com/lockproxy/lockproxy/bench/internal/scenario"
)

type fake struct{}

func (fake) Name() string    { return "known" }
func (fake) Summary() string { return "a known scenario" }
func (fake) Run(context.Context, *env.Env, scenario.Options, *results.Result) error {
	return nil
}
func (fake) Report(r *results.Result, _, rel string) (string, error) {
	return "KNOWN SECTION " + rel + "\n", nil
}

func TestWrite(t *testing.T) {
	root := t.TempDir()
	resDir := filepath.Join(root, "results")
	if err := os.MkdirAll(resDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(resDir, "known.notes.md"), []byte("Hand reading.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	rs := []*results.Result{
		{Scenario: "known", Mode: "full", Started: start, Finished: start.Add(time.Minute), Command: "go run ./bench/cmd/bench",
			Machine: results.Machine{NProc: 2, CPUModel: "cpu", Commit: "abc", CommitDirty: true},
			Targets: []results.Target{{Name: "ratio", Want: ">= 0.6", Got: "0.7", Met: true}}},
		{Scenario: "unknown", Mode: "quick", Started: start, Finished: start},
	}
	out := filepath.Join(root, "RESULTS.md")
	if err := Write(out, resDir, rs, scenario.NewRegistry(fake{})); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"## known", "A known scenario.", "KNOWN SECTION results", "| ratio | >= 0.6 | 0.7 | yes |",
		"### Reading\n\nHand reading.", "commit `abc` (working tree had uncommitted changes)",
		"## unknown", "does not know this scenario", "| [known](#known) | full | 2026-11-29 18:00 | 1 of 1 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
