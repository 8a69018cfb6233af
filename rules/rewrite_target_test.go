package rules

import (
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
			r, keys, ok := rs.RewriteTarget(an.Stmts[0], "shop", c.params)
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
