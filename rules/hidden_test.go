package rules

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// objectsYAML guards shop.sku_stock and lets one routine and one trigger
// through.
const objectsYAML = `
users: [{user: app}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: sku-stock
    table: shop.sku_stock
    key: [sku_id]
    rewrite: {column: stock, mode: delta, min: 0}
    allow_routines: [shop.allowed_p]
    allow_triggers: [shop.allowed_trg]
  - name: reads-only
    table: shop.prices
    key: [sku_id]
    lock: [locking_read]
`

func objectsSet(t *testing.T) *RuleSet {
	t.Helper()
	cfg, err := load("objects.yaml", []byte(objectsYAML), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	def := func(cols, from string) string { return "select " + cols + " from " + from }
	schema := NewSchema(&TableInfo{Schema: "shop", Name: "sku_stock",
		Columns:    map[string]Column{"sku_id": {Name: "sku_id", DataType: "bigint"}, "stock": {Name: "stock", DataType: "int"}},
		UniqueKeys: [][]string{{"sku_id"}}}).WithObjects(Objects{
		Views: []View{
			{Schema: "shop", Name: "v_sku", Definition: "select `shop`.`sku_stock`.`sku_id` AS `id`,`shop`.`sku_stock`.`stock` AS `qty` from `shop`.`sku_stock` where `shop`.`sku_stock`.`stock` >= 0"},
			{Schema: "shop", Name: "v_sku2", Definition: def("id AS k, qty", "v_sku")},
			{Schema: "shop", Name: "v_total", Definition: def("sku_id, SUM(stock) AS total", "sku_stock GROUP BY sku_id")},
			{Schema: "shop", Name: "v_join", Definition: def("s.sku_id, o.n", "sku_stock s JOIN orders o ON o.sku_id = s.sku_id")},
			{Schema: "shop", Name: "v_orders", Definition: def("id, n", "orders")},
			{Schema: "shop", Name: "v_calls", Definition: def("id, f_touch(id) AS x", "orders")},
			{Schema: "shop", Name: "v_secret"},
		},
		Routines: []Routine{
			{Schema: "shop", Name: "p_touch", Body: "BEGIN UPDATE sku_stock SET stock = 0; END", BodyKnown: true},
			{Schema: "shop", Name: "p_view", Body: "BEGIN DELETE FROM v_sku WHERE id = 1; END", BodyKnown: true},
			{Schema: "shop", Name: "p_nested", Body: "BEGIN CALL p_touch(); END", BodyKnown: true},
			{Schema: "shop", Name: "p_dynamic", Body: "BEGIN PREPARE s FROM @q; EXECUTE s; END", BodyKnown: true},
			{Schema: "shop", Name: "p_hidden"},
			{Schema: "shop", Name: "p_orders", Body: "BEGIN INSERT INTO orders VALUES (1, 2); END", BodyKnown: true},
			{Schema: "shop", Name: "p_safe", Body: "BEGIN SELECT 1; END", BodyKnown: true},
			{Schema: "shop", Name: "allowed_p", Body: "BEGIN UPDATE shop.sku_stock SET stock = 1; END", BodyKnown: true},
			{Schema: "shop", Name: "f_touch", Function: true, Body: "BEGIN UPDATE sku_stock SET stock = stock - 1; RETURN 1; END", BodyKnown: true},
			{Schema: "shop", Name: "f_safe", Function: true, Body: "RETURN 1", BodyKnown: true},
		},
		Triggers: []Trigger{
			{Schema: "shop", Name: "trg_orders", Table: "orders", Event: "INSERT", Body: "UPDATE sku_stock SET stock = stock - NEW.n WHERE sku_id = NEW.sku_id"},
			{Schema: "shop", Name: "allowed_trg", Table: "returns", Event: "INSERT", Body: "UPDATE sku_stock SET stock = stock + NEW.n WHERE sku_id = NEW.sku_id"},
			{Schema: "shop", Name: "trg_log", Table: "log", Event: "DELETE", Body: "INSERT INTO log_archive VALUES (OLD.id)"},
			{Schema: "shop", Name: "trg_key", Table: "sku_stock", Event: "INSERT", Before: true, Body: "SET NEW.sku_id = NEW.sku_id + 1"},
			{Schema: "shop", Name: "trg_stock", Table: "sku_stock", Event: "UPDATE", Before: true, Body: "SET NEW.stock = GREATEST(NEW.stock, 0)"},
		},
	})
	rs, err := Compile(cfg, schema)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestMatchObjects matches statements that reach guarded tables through
// views, stored routines and triggers.
func TestMatchObjects(t *testing.T) {
	rs := objectsSet(t)
	tests := []struct {
		name   string
		sql    string
		inTxn  bool
		rule   string // "" when no rule matches
		keys   string
		reject string // a substring of the rejection; "" when not rejected
	}{
		{name: "write through a projection view locks the base row", sql: "UPDATE v_sku SET qty = 0 WHERE id = 7",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/7"},
		{name: "view column spellings normalise like the base column", sql: "DELETE FROM shop.v_sku WHERE id IN ('7', 8)",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/7 sku-stock=shop.sku_stock/8"},
		{name: "insert through a projection view fires the table's BEFORE trigger", sql: "INSERT INTO v_sku (id, qty) VALUES (9, 1)",
			rule: "sku-stock", reject: "trigger shop.trg_key on shop.sku_stock"},
		{name: "key moved through a view", sql: "UPDATE v_sku SET id = 2 WHERE id = 1",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2"},
		{name: "view of a view", sql: "UPDATE v_sku2 SET qty = 1 WHERE k = 5",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/5"},
		{name: "locking read through a view", sql: "SELECT qty FROM v_sku WHERE id = 3 FOR UPDATE",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/3"},
		{name: "read in a transaction through a view", sql: "SELECT qty FROM v_sku WHERE id = 4", inTxn: true,
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/4"},
		{name: "autocommit read through a view takes no lock", sql: "SELECT qty FROM v_sku WHERE id = 4",
			rule: "sku-stock"},
		{name: "unkeyed write through a projection view", sql: "UPDATE v_sku SET qty = 0",
			rule: "sku-stock", reject: "cannot derive the row keys of shop.sku_stock (the condition does not pin every key column [sku_id] to constants; through view shop.v_sku)"},
		{name: "condition on a non-key view column", sql: "UPDATE v_sku SET qty = 0 WHERE qty = 5",
			rule: "sku-stock", reject: "through view shop.v_sku"},
		{name: "aggregate view", sql: "SELECT total FROM v_total FOR UPDATE",
			rule: "sku-stock", reject: "through view shop.v_total, which is not a plain projection of one table: it groups rows"},
		{name: "join view", sql: "UPDATE v_join SET n = 1 WHERE sku_id = 1",
			rule: "sku-stock", reject: "through view shop.v_join"},
		{name: "view of an unguarded table", sql: "UPDATE v_orders SET n = 1 WHERE id = 1"},
		{name: "view definition not visible", sql: "DELETE FROM v_secret WHERE id = 1",
			rule: "sku-stock", reject: "cannot see its definition"},
		{name: "procedure naming a guarded table", sql: "CALL p_touch()",
			rule: "sku-stock", reject: "procedure shop.p_touch may write shop.sku_stock"},
		{name: "procedure naming a guarded view", sql: "CALL shop.p_view()",
			rule: "sku-stock", reject: "its body names view shop.v_sku"},
		{name: "procedure calling a procedure", sql: "CALL p_nested", rule: "sku-stock", reject: "it calls procedure shop.p_touch"},
		{name: "dynamic SQL", sql: "CALL p_dynamic()", rule: "sku-stock", reject: "dynamic SQL"},
		{name: "body not visible", sql: "CALL p_hidden()", rule: "sku-stock", reject: "cannot see its body"},
		{name: "unknown procedure", sql: "CALL nowhere()", rule: "sku-stock", reject: "procedure shop.nowhere"},
		{name: "procedure whose write fires a trigger", sql: "CALL p_orders()", rule: "sku-stock",
			reject: "its writes fire trigger shop.trg_orders on shop.orders"},
		{name: "harmless procedure", sql: "CALL p_safe()"},
		{name: "allowed procedure", sql: "CALL allowed_p()", rule: ""},
		{name: "function in a SELECT", sql: "SELECT f_touch(1)", rule: "sku-stock", reject: "function shop.f_touch"},
		{name: "function in an UPDATE of another table", sql: "UPDATE orders SET n = f_touch(n) WHERE id = 1",
			rule: "sku-stock", reject: "function shop.f_touch"},
		{name: "function in SET", sql: "SET @x = shop.f_touch(2)", rule: "sku-stock", reject: "function shop.f_touch"},
		{name: "function through a view", sql: "SELECT x FROM v_calls", rule: "sku-stock", reject: "function shop.f_touch"},
		{name: "harmless function and built-ins", sql: "SELECT f_safe(1), NOW(), CONCAT('a', 'b')"},
		{name: "trigger on a written table", sql: "INSERT INTO orders (id, n) VALUES (1, 2)",
			rule: "sku-stock", reject: "trigger shop.trg_orders on shop.orders may write shop.sku_stock"},
		{name: "trigger through a view of its table", sql: "INSERT INTO v_orders (id, n) VALUES (1, 2)",
			rule: "sku-stock", reject: "trigger shop.trg_orders"},
		{name: "trigger of another event does not fire", sql: "UPDATE orders SET n = 3 WHERE id = 1"},
		{name: "reading a table with a trigger", sql: "SELECT * FROM orders FOR UPDATE"},
		{name: "allowed trigger", sql: "INSERT INTO returns (id, n) VALUES (1, 2)"},
		{name: "trigger not reaching a guarded table", sql: "DELETE FROM log WHERE id = 1"},
		{name: "DDL naming a function", sql: "CREATE VIEW v_new AS SELECT f_touch(1) AS x"},
		{name: "BEFORE trigger setting the key", sql: "INSERT INTO sku_stock (sku_id, stock) VALUES (1000, 1)",
			rule: "sku-stock", reject: "trigger shop.trg_key on shop.sku_stock may write shop.sku_stock where lockproxy cannot lock its rows (it may set NEW.sku_id, a key column"},
		{name: "BEFORE trigger setting another column", sql: "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1000",
			rule: "sku-stock", keys: "sku-stock=shop.sku_stock/1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parser.Analyze(tt.sql, "shop")
			if err != nil || a.Unparsed || len(a.Stmts) != 1 {
				t.Fatalf("Analyze: %v (%s)", err, a.ParseError)
			}
			d := rs.Match(a.Stmts[0], "shop", tt.inTxn)
			rule := ""
			if d.Rule != nil {
				rule = d.Rule.Name
			}
			msg := d.RejectReason()
			switch {
			case rule != tt.rule:
				t.Fatalf("rule %q, want %q (%s)", rule, tt.rule, msg)
			case tt.reject == "" && d.Reject:
				t.Fatalf("rejected: %s", msg)
			case tt.reject != "" && (!d.Reject || !strings.Contains(msg, tt.reject)):
				t.Fatalf("reject=%v %q, want a rejection containing %q", d.Reject, msg, tt.reject)
			case d.Reject && !strings.HasPrefix(msg, "rule "+tt.rule+": "):
				t.Fatalf("rejection %q does not start with lockproxy: and the rule", msg)
			case keyNames(d) != tt.keys:
				t.Fatalf("keys %q, want %q", keyNames(d), tt.keys)
			case strings.Contains(tt.sql, "v_") && d.Rewrite != nil:
				t.Fatal("a write through a view must not be rewritten (the rewrite names the table's columns)")
			}
		})
	}
}

// TestMatchObjectsUnknown: without the primary's objects lockproxy cannot
// tell what a procedure does, so CALL is refused; functions (which it
// cannot tell from built-ins) are not.
func TestMatchObjectsUnknown(t *testing.T) {
	rs := matchSet(t, Schema{})
	for sql, reject := range map[string]bool{"CALL p()": true, "SELECT f(1)": false} {
		a, err := parser.Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		d := rs.Match(a.Stmts[0], "shop", false)
		if d.Reject != reject || (reject && !strings.Contains(d.RejectReason(), "could not read the primary's stored routines")) {
			t.Fatalf("%s: reject=%v %q", sql, d.Reject, d.RejectReason())
		}
	}
}

// TestMatchUnparsedObjects: text the parser rejects still meets the views
// and routines it names.
func TestMatchUnparsedObjects(t *testing.T) {
	rs := objectsSet(t)
	tests := []struct{ sql, reject string }{
		// The view's table has a BEFORE trigger that may set its key.
		{sql: "UPDATE v_sku SET qty = 1 WHERE id = 1 RETURNING garbage garbage", reject: "trigger shop.trg_key on shop.sku_stock"},
		{sql: "SELECT f_touch(1) garbage garbage", reject: "function shop.f_touch"},
		{sql: "INSERT INTO orders VALUES (1, 2) RETURNING garbage garbage", reject: "trigger shop.trg_orders"},
	}
	for _, tt := range tests {
		t.Run(tt.sql, func(t *testing.T) {
			a, err := parser.Analyze(tt.sql, "shop")
			if err != nil || !a.Unparsed {
				t.Fatalf("want unparsed text: %v", err)
			}
			d := rs.MatchUnparsed(a, "shop")
			if !d.Reject || !strings.Contains(d.RejectReason(), tt.reject) {
				t.Fatalf("reject=%v %q, want %q", d.Reject, d.RejectReason(), tt.reject)
			}
		})
	}
}

func TestAllowListsValidated(t *testing.T) {
	yaml := objectsYAML + `
  - name: bad
    table: shop.other
    key: [id]
    allow_routines: [p, shop.p, SHOP.P]
    allow_triggers: [""]
`
	_, err := load("objects.yaml", []byte(yaml), testEnv, "")
	if err == nil {
		t.Fatal("bad allow lists accepted")
	}
	for _, want := range []string{"rules[2].allow_routines[0]", "rules[2].allow_routines[2]", "rules[2].allow_triggers[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}
