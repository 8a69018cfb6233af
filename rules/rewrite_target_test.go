package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

func TestRewriteTarget(t *testing.T) {
	cfg, err := LoadBytes("t.yaml", []byte(`
users: [{user: app, password: x}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: stock
    table: shop.sku_stock
    key: [sku_id]
    lock: []
    rewrite: {column: stock, mode: delta, min: 0}
  - name: plain
    table: shop.other
    key: [id]
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, Schema{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql    string
		params []any
		rule   string
		keys   int
	}{
		{"SELECT stock FROM sku_stock WHERE sku_id = 7", nil, "stock", 1},
		{"SELECT stock FROM sku_stock WHERE sku_id = ?", []any{int64(7)}, "stock", 1},
		{"UPDATE sku_stock SET stock = 3 WHERE sku_id IN (1, 2)", nil, "stock", 2},
		{"SELECT stock FROM sku_stock", nil, "", 0},                                                  // no key
		{"SELECT * FROM sku_stock s JOIN other o ON o.id = s.sku_id WHERE s.sku_id = 1", nil, "", 0}, // two tables
		{"SELECT * FROM other WHERE id = 1", nil, "", 0},                                             // no rewrite rule
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			an, err := parser.Analyze(c.sql, "shop")
			if err != nil || len(an.Stmts) != 1 {
				t.Fatalf("analyze: %v", err)
			}
			r, keys, ok := rs.Match(an.Stmts[0], "shop", false).Bind(c.params).RewriteTarget()
			if c.rule == "" {
				if ok {
					t.Fatalf("unexpected target %s %v", r.Name, keys)
				}
				return
			}
			if !ok || r.Name != c.rule || len(keys) != c.keys {
				t.Fatalf("got ok=%v rule=%v keys=%v", ok, r, keys)
			}
		})
	}
}

func TestFenceValidation(t *testing.T) {
	for _, c := range []struct{ fence, want string }{
		{"fence", ""},
		{"stock", "must not be the rewrite column"},
		{"sku_id", "must not be a key column"},
		{"fence`; DROP", "must be a plain column name"},
	} {
		_, err := LoadBytes("t.yaml", []byte(`
users: [{user: app, password: x}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: stock
    table: shop.sku_stock
    key: [sku_id]
    fence: "`+c.fence+`"
    rewrite: {column: stock, mode: delta}
`))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("fence %q: %v", c.fence, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("fence %q: want %q, got %v", c.fence, c.want, err)
		}
	}
}

// TestOptimisticRuleLocksNothing: a rewrite rule with lock: [] loads with
// the rewrite defaults, asks for no lock whatever the statement (so it
// costs no lock-service round trip), and still names the rows to rewrite.
func TestOptimisticRuleLocksNothing(t *testing.T) {
	cfg, err := LoadBytes("t.yaml", []byte(`
users: [{user: app, password: x}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: hot
    table: shop.sku_stock
    key: [sku_id]
    lock: []
    rewrite: {column: stock, mode: cas}
`))
	if err != nil {
		t.Fatal(err)
	}
	rw := cfg.Rules[0].Rewrite
	if rw.Scope != ScopeTransaction || rw.OnConflict != OnConflictError || rw.OnUnpaired != OnUnpairedAllow {
		t.Errorf("rewrite defaults: scope %q on_conflict %q on_unpaired %q", rw.Scope, rw.OnConflict, rw.OnUnpaired)
	}
	rs, err := Compile(cfg, Schema{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"SELECT stock FROM sku_stock WHERE sku_id = 7",
		"SELECT stock FROM sku_stock WHERE sku_id = 7 FOR UPDATE",
		"UPDATE sku_stock SET stock = 3 WHERE sku_id = 7",
		"UPDATE sku_stock SET stock = 3",
	} {
		an, err := parser.Analyze(sql, "shop")
		if err != nil || len(an.Stmts) != 1 {
			t.Fatalf("analyze %q: %v", sql, err)
		}
		for _, inTxn := range []bool{false, true} {
			if d := rs.Match(an.Stmts[0], "shop", inTxn); len(d.Keys) != 0 || d.Reject {
				t.Errorf("%q (in txn %v): keys %v reject %v, want neither", sql, inTxn, d.Keys, d.Reject)
			}
		}
	}
	an, _ := parser.Analyze("UPDATE sku_stock SET stock = 3 WHERE sku_id = 7", "shop")
	if r, keys, ok := rs.Match(an.Stmts[0], "shop", false).RewriteTarget(); !ok || r.Name != "hot" || len(keys) != 1 {
		t.Errorf("RewriteTarget: ok %v rule %v keys %v", ok, r, keys)
	}
}

// TestTargetKeysAreLockKeys: Match derives a locking rule's rewrite and
// fence target with its lock keys, once: the target names exactly the
// rows the statement locks, bound from the same parameters; a statement
// whose rows cannot be keyed has none.
func TestTargetKeysAreLockKeys(t *testing.T) {
	cfg, err := LoadBytes("t.yaml", []byte(`
users: [{user: app, password: x}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: stock
    table: shop.sku_stock
    key: [sku_id]
    lock: [write, locking_read]
    fence: fence
    rewrite: {column: stock, mode: delta, min: 0}
  - name: audit
    table: shop.sku_stock
    key: [sku_id]
    lock: [write]
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, Schema{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql    string
		params []any
		target string // the rewrite and fence target's rule; "" for none
		keys   int
	}{
		{"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id IN (1, 2) AND shop_id = 3", nil, "stock", 2},
		{"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = ? AND shop_id = ?", []any{int64(7), int64(3)}, "stock", 1},
		{"SELECT stock FROM sku_stock WHERE sku_id = 4 AND shop_id = 3 FOR UPDATE", nil, "stock", 1},
		{"UPDATE sku_stock SET stock = stock - 1 WHERE shop_id = 3", nil, "", 0}, // no key
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			an, err := parser.Analyze(c.sql, "shop")
			if err != nil || len(an.Stmts) != 1 {
				t.Fatalf("analyze: %v", err)
			}
			d := rs.Match(an.Stmts[0], "shop", true)
			if _, _, ok := d.RewriteTarget(); ok && d.NeedParams {
				t.Fatal("a target before its parameters are bound")
			}
			d = d.Bind(c.params)
			for _, find := range []func() (*Rule, []Key, bool){d.RewriteTarget, d.FenceTarget} {
				r, keys, ok := find()
				if c.target == "" {
					if ok {
						t.Fatalf("unexpected target %s %v", r.Name, keys)
					}
					continue
				}
				if !ok || r.Name != c.target || len(keys) != c.keys {
					t.Fatalf("got ok=%v rule=%v keys=%v", ok, r, keys)
				}
				var locked []Key
				for _, k := range d.Keys {
					if k.Rule == c.target {
						locked = append(locked, k)
					}
				}
				if !slices.Equal(keys, locked) {
					t.Fatalf("target keys %v, lock keys %v", keys, locked)
				}
			}
		})
	}
}
