package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of lockproxy check")

// TestCheckLogs: `lockproxy check` on logs MariaDB wrote prints the
// decision for each statement shape: observed locks, rewrites and
// refusals of the observing rule, the enforcing rule's locks and refusals.
// The general log has sessions interleaved, a statement on several lines,
// SQL-level PREPARE/EXECUTE, protocol prepared statements and a change of
// database; the slow log (long_query_time = 0) the same session's
// statements, each with its schema.
func TestCheckLogs(t *testing.T) {
	for _, c := range []struct {
		log, golden string
		facts       []string // what the golden file must keep, whatever else changes
	}{
		{"general.log", "check.golden", []string{
			"3 x select `stock` from `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    observed:   would_rewrite sku-stock\n    observed:   would_lock sku-stock (1 key)",
			"3 x update `sku_stock` set `stock` = ? where `sku_id` = ?",
			"observed:   would_refuse sku-stock (unkeyed)",
			"locks:      orders (1 key)",
			"rejected:   ERROR 1105 (HY000): lockproxy: rule orders: procedure shop.restock",
			"statements: 24 in 16 shapes",
		}},
		{"slow.log", "check_slow.golden", []string{
			"1 x select `stock` from `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    observed:   would_rewrite sku-stock",
			"1 x select `stock` from `shop` . `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    route:",
			"observed:   would_refuse sku-stock (unkeyed)",
			"statements: 10 in 10 shapes",
		}},
	} {
		t.Run(c.log, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"check", "--config", "testdata/check.yaml", "--log", filepath.Join("testdata", c.log)}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			golden := filepath.Join("testdata", c.golden)
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("lockproxy check output differs from %s (run with -update to accept):\n%s", golden, out.String())
			}
			for _, f := range c.facts {
				if !strings.Contains(out.String(), f) {
					t.Errorf("output lacks %q", f)
				}
			}
		})
	}
}

func TestCheckUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", "testdata/check.yaml"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("check without --log: exit %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"check", "--config", "testdata/check.yaml", "--log", "testdata/missing.log"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "lockproxy:") {
		t.Errorf("check of a missing log: exit %d, stderr %q", code, errb.String())
	}
}
