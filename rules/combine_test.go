package rules

import (
	"strings"
	"testing"
	"time"
)

func TestCombineConfig(t *testing.T) {
	base := "users: [{user: app, password: x}]\nbackends: {primary: 127.0.0.1:3306}\nrules:\n  - name: s\n    table: shop.sku_stock\n    key: [sku_id]\n"
	rw := "    rewrite: {column: stock, mode: delta, min: 0}\n"
	tests := []struct {
		name, yaml, wantErr string
		max                 int
		marker              string // db.table, "" for none
		hold                time.Duration
	}{
		{"present means on, default max_batch", base + rw + "    combine: {}\n", "", DefaultCombineMaxBatch, DefaultCombineMarkerTable, DefaultCombineHoldWindow},
		{"max_batch", base + rw + "    combine: {max_batch: 16}\n", "", 16, DefaultCombineMarkerTable, DefaultCombineHoldWindow},
		{"marker_table", base + rw + "    combine: {marker_table: ops.batches}\n", "", DefaultCombineMaxBatch, "ops.batches", DefaultCombineHoldWindow},
		{"no marker", base + rw + "    combine: {marker_table: none}\n", "", DefaultCombineMaxBatch, "", DefaultCombineHoldWindow},
		{"marker_table needs a database", base + rw + "    combine: {marker_table: batches}\n", "rules[0].combine.marker_table: must be db.table", 0, "", 0},
		{"marker_table names", base + rw + "    combine: {marker_table: \"a.b-c\"}\n", "rules[0].combine.marker_table: must be db.table", 0, "", 0},
		{"needs rewrite", base + "    combine: {}\n", "rules[0].combine: needs rewrite", 0, "", 0},
		{"not with fence", base + rw + "    fence: f\n    combine: {}\n", "rules[0].combine: cannot be used with fence", 0, "", 0},
		{"max_batch bounded", base + rw + "    combine: {max_batch: 5000}\n", "rules[0].combine.max_batch: must be between 1 and 4096", 0, "", 0},
		{"hold_window", base + rw + "    combine: {hold_window: 25ms}\n", "", DefaultCombineMaxBatch, DefaultCombineMarkerTable, 25 * time.Millisecond},
		{"hold_window off", base + rw + "    combine: {hold_window: 0s}\n", "", DefaultCombineMaxBatch, DefaultCombineMarkerTable, 0},
		{"hold_window negative", base + rw + "    combine: {hold_window: -1ms}\n", "rules[0].combine.hold_window: must not be negative", 0, "", 0},
		{"unknown key", base + rw + "    combine: {batch: 3}\n", "batch", 0, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadBytes("rules.yaml", []byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := &cfg.Rules[0]
			if !r.Combines() || r.Combine.MaxBatch != tc.max {
				t.Fatalf("combines %v max_batch %d, want true %d", r.Combines(), r.Combine.MaxBatch, tc.max)
			}
			if got := r.Combine.HoldWindow.D(); got != tc.hold {
				t.Fatalf("hold_window %v, want %v", got, tc.hold)
			}
			db, table, ok := r.Combine.Marker()
			if got := db + "." + table; ok != (tc.marker != "") || ok && got != tc.marker {
				t.Fatalf("marker %q (%v), want %q", got, ok, tc.marker)
			}
		})
	}
}
