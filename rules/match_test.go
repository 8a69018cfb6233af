package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

const matchYAML = `
users: [{user: app}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: sku-stock
    table: shop.sku_stock
    key: [sku_id]
    route: primary
    wait_timeout: 2s
    rewrite: {column: stock, mode: delta, min: 0}
  - name: orders
    table: Orders
    key: [order_id, line_no]
    lock: [write]
    on_unkeyed: allow
  - name: wallet
    table: bank.wallet
    key: [id]
  - name: wallet-audit
    table: wallet
    key: [ID]
    lock: [write]
`

func matchSet(t *testing.T, schema Schema) *RuleSet {
	t.Helper()
	cfg, err := load("match.yaml", []byte(matchYAML), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, schema)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func ref(schema, name string, write bool, p *parser.Predicate) parser.TableRef {
	return parser.TableRef{Schema: schema, Name: name, Write: write, Where: p}
}

func or(conjs ...parser.Conj) *parser.Predicate { return &parser.Predicate{Or: conjs} }

func eq(col string, v parser.Value) parser.Atom { return parser.Atom{Column: col, Value: v} }

func param(i int) parser.Value { return parser.Value{Kind: parser.ValueParam, Param: i, Text: "?"} }

func keyNames(d Decision) string {
	var out []string
	for _, k := range d.Keys {
		out = append(out, k.Rule+"="+k.Name)
	}
	return strings.Join(out, " ")
}

func TestMatch(t *testing.T) {
	rs := matchSet(t, Schema{})
	sku := func(vs ...parser.Value) *parser.Predicate {
		var conjs []parser.Conj
		for _, v := range vs {
			conjs = append(conjs, parser.Conj{eq("sku_id", v)})
		}
		return or(conjs...)
	}
	update := func(p *parser.Predicate, assigns ...parser.Assignment) *parser.Facts {
		return &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("shop", "sku_stock", true, p)}, Assignments: assigns}
	}
	sel := func(lock parser.LockMode, refs ...parser.TableRef) *parser.Facts {
		return &parser.Facts{Kind: parser.KindSelect, Lock: parser.LockClause{Mode: lock}, Tables: refs}
	}
	tests := []struct {
		name      string
		f         *parser.Facts
		db        string
		inTxn     bool
		rule      string // "" for no match
		class     LockClass
		keys      string
		unkeyed   bool
		reject    bool
		primary   bool
		rewrite   bool
		needParam bool
	}{
		{name: "update by key", f: update(sku(vInt(1001))), rule: "sku-stock", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1001", primary: true, rewrite: true},
		{name: "string spelling is the same key", f: update(sku(vStr(" 1001"))), rule: "sku-stock", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1001", primary: true, rewrite: true},
		{name: "IN list sorted and deduplicated", f: update(sku(vInt(3), vInt(10), vInt(2), vInt(3))), rule: "sku-stock", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/10 sku-stock=shop.sku_stock/2 sku-stock=shop.sku_stock/3", primary: true, rewrite: true},
		{name: "no condition rejects", f: update(or(parser.Conj{})), rule: "sku-stock", class: ClassWrite,
			unkeyed: true, reject: true, primary: true, rewrite: true},
		{name: "NULL is unkeyed", f: update(sku(parser.Value{Kind: parser.ValueNull, Text: "NULL"})), rule: "sku-stock", class: ClassWrite,
			unkeyed: true, reject: true, primary: true, rewrite: true},
		{name: "key column moved", f: update(sku(vInt(1)), parser.Assignment{Column: "sku_id", Kind: parser.AssignLiteral, Value: vInt(2)}),
			rule: "sku-stock", class: ClassWrite, keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2", primary: true, rewrite: true},
		{name: "key column set from an expression", f: update(sku(vInt(1)), parser.Assignment{Column: "sku_id", Kind: parser.AssignOther}),
			rule: "sku-stock", class: ClassWrite, unkeyed: true, reject: true, primary: true, rewrite: true},
		{name: "plain select outside a transaction", f: sel(parser.LockNone, ref("shop", "sku_stock", false, sku(vInt(1)))),
			rule: "sku-stock", class: ClassNone, primary: true},
		{name: "plain select in a transaction", f: sel(parser.LockNone, ref("shop", "sku_stock", false, sku(vInt(1)))), inTxn: true,
			rule: "sku-stock", class: ClassReadInTxn, keys: "sku-stock=shop.sku_stock/1", primary: true},
		{name: "for update", f: sel(parser.LockForUpdate, ref("shop", "sku_stock", false, sku(vInt(1)))),
			rule: "sku-stock", class: ClassLockingRead, keys: "sku-stock=shop.sku_stock/1", primary: true},
		{name: "rule that locks writes only ignores locking reads", f: sel(parser.LockForShare, ref("shop", "orders", false, nil)),
			rule: "orders", class: ClassNone},
		{name: "same table name in another database", f: &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("x", "sku_stock", true, nil)}}},
		{name: "unguarded table", f: sel(parser.LockForUpdate, ref("shop", "users", false, nil))},
		{name: "ddl is not matched", f: &parser.Facts{Kind: parser.KindDDL, Tables: []parser.TableRef{ref("shop", "sku_stock", true, nil)}}},
		{name: "any-db rule with the session database", db: "Sales",
			f:    &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("", "orders", true, or(parser.Conj{eq("order_id", vInt(7)), eq("line_no", vStr("1"))}))}},
			rule: "orders", class: ClassWrite, keys: "orders=sales.orders/7/1"},
		{name: "unkeyed with on_unkeyed allow", f: &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("s", "orders", true, or(parser.Conj{eq("order_id", vInt(7))}))}},
			rule: "orders", class: ClassWrite, unkeyed: true},
		{name: "join over two guarded tables", inTxn: true,
			f: sel(parser.LockForUpdate, ref("shop", "sku_stock", false, sku(vInt(5))),
				ref("bank", "wallet", false, or(parser.Conj{eq("id", vInt(9))}))),
			rule: "sku-stock", class: ClassLockingRead, keys: "wallet=bank.wallet/9 sku-stock=shop.sku_stock/5", primary: true},
		{name: "two rules on one row take one lock",
			f:    &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("bank", "wallet", true, or(parser.Conj{eq("id", vInt(9))}))}},
			rule: "wallet", class: ClassWrite, keys: "wallet=bank.wallet/9"},
		{name: "placeholder waits for Bind", f: update(sku(param(0))), rule: "sku-stock", class: ClassWrite,
			primary: true, rewrite: true, needParam: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.db == "" {
				tt.db = "shop"
			}
			d := rs.Match(tt.f, tt.db, tt.inTxn)
			gotRule := ""
			if d.Rule != nil {
				gotRule = d.Rule.Name
			}
			if gotRule != tt.rule || d.Class != tt.class || keyNames(d) != tt.keys || d.IsUnkeyed() != tt.unkeyed ||
				d.Reject != tt.reject || d.RoutePrimary != tt.primary || (d.Rewrite != nil) != tt.rewrite || d.NeedParams != tt.needParam {
				t.Fatalf("got rule=%q class=%q keys=%q unkeyed=%v(%s) reject=%v primary=%v rewrite=%v needParams=%v",
					gotRule, d.Class, keyNames(d), d.IsUnkeyed(), d.UnkeyedReason(), d.Reject, d.RoutePrimary, d.Rewrite != nil, d.NeedParams)
			}
			if tt.reject && !strings.HasPrefix(d.RejectReason(), "rule "+tt.rule+":") {
				t.Errorf("reject message %q", d.RejectReason())
			}
		})
	}
}

func TestBind(t *testing.T) {
	rs := matchSet(t, Schema{})
	f := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("shop", "sku_stock", true,
		or(parser.Conj{eq("sku_id", param(1))}, parser.Conj{eq("sku_id", vInt(7))}))}}
	d := rs.Match(f, "shop", false)
	if !d.NeedParams || len(d.Keys) != 0 {
		t.Fatalf("before Bind: needParams=%v keys=%v", d.NeedParams, d.Keys)
	}
	tests := []struct {
		name   string
		params []any
		keys   string
		reject bool
	}{
		{"int64", []any{"x", int64(1001)}, "sku-stock=shop.sku_stock/1001 sku-stock=shop.sku_stock/7", false},
		{"bytes spelling", []any{nil, []byte("1001")}, "sku-stock=shop.sku_stock/1001 sku-stock=shop.sku_stock/7", false},
		{"uint", []any{nil, uint64(7)}, "sku-stock=shop.sku_stock/7", false},
		{"NULL", []any{nil, nil}, "", true},
		{"missing", []any{int64(1)}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := d.Bind(tt.params)
			if keyNames(b) != tt.keys || b.Reject != tt.reject || b.NeedParams {
				t.Fatalf("keys=%q reject=%v (%s) needParams=%v", keyNames(b), b.Reject, b.UnkeyedReason(), b.NeedParams)
			}
		})
	}
	if !d.NeedParams || len(d.Keys) != 0 {
		t.Fatal("Bind modified the original Decision")
	}
}

func TestMatchInsert(t *testing.T) {
	info := &TableInfo{Schema: "shop", Name: "sku_stock", Columns: map[string]Column{
		"sku_id": {Name: "sku_id", DataType: "bigint", ColumnType: "bigint(20)", AutoIncrement: true},
		"stock":  {Name: "stock", DataType: "int", ColumnType: "int(11)"},
	}, UniqueKeys: [][]string{{"sku_id"}}, Order: []string{"sku_id", "stock"}}
	withSchema := matchSet(t, NewSchema(info))
	unordered := *info
	unordered.Order = nil
	withoutOrder := matchSet(t, NewSchema(&unordered))
	positional := func(kind parser.Kind, rows ...[]parser.Value) *parser.Facts {
		return &parser.Facts{Kind: kind, Insert: &parser.InsertFacts{Rows: rows},
			Tables: []parser.TableRef{ref("shop", "sku_stock", true, &parser.Predicate{Unkeyed: true, Residual: true})}}
	}
	without := matchSet(t, Schema{})
	insert := func(kind parser.Kind, cols []string, rows [][]parser.Value, odku ...parser.Assignment) *parser.Facts {
		var conjs []parser.Conj
		for _, r := range rows {
			var c parser.Conj
			for i, v := range r {
				c = append(c, eq(cols[i], v))
			}
			conjs = append(conjs, c)
		}
		return &parser.Facts{Kind: kind, Insert: &parser.InsertFacts{Columns: cols, Rows: rows, OnDuplicate: odku},
			Tables: []parser.TableRef{ref("shop", "sku_stock", true, or(conjs...))}}
	}
	tests := []struct {
		name    string
		rs      *RuleSet
		f       *parser.Facts
		keys    string
		unkeyed bool
	}{
		{"values rows", withSchema, insert(parser.KindInsert, []string{"sku_id", "stock"}, [][]parser.Value{{vStr("12"), vInt(1)}, {vDec("11.5"), vInt(1)}}),
			"sku-stock=shop.sku_stock/12", false},
		{"auto increment left out", withSchema, insert(parser.KindInsert, []string{"stock"}, [][]parser.Value{{vInt(1)}}), "", false},
		{"auto increment NULL", withSchema, insert(parser.KindInsert, []string{"sku_id", "stock"}, [][]parser.Value{{{Kind: parser.ValueNull}, vInt(1)}}), "", false},
		{"upsert leaving out the key", withSchema, insert(parser.KindReplace, []string{"stock"}, [][]parser.Value{{vInt(1)}}), "", true},
		{"key left out, table not described", without, insert(parser.KindInsert, []string{"stock"}, [][]parser.Value{{vInt(1)}}), "", true},
		{"no column list: the table's order", withSchema, positional(parser.KindInsert, []parser.Value{vInt(5), vInt(1)}, []parser.Value{vInt(6), vInt(2)}),
			"sku-stock=shop.sku_stock/5 sku-stock=shop.sku_stock/6", false},
		{"no column list, auto increment NULL", withSchema, positional(parser.KindInsert, []parser.Value{{Kind: parser.ValueNull}, vInt(1)}), "", false},
		{"no column list, REPLACE", withSchema, positional(parser.KindReplace, []parser.Value{vInt(5), vInt(1)}), "sku-stock=shop.sku_stock/5", false},
		{"no column list, order not known", withoutOrder, positional(parser.KindInsert, []parser.Value{vInt(5), vInt(1)}), "", true},
		{"no column list, table not described", without, positional(parser.KindInsert, []parser.Value{vInt(5), vInt(1)}), "", true},
		{"no column list, a row of another length", withSchema, positional(parser.KindInsert, []parser.Value{vInt(5)}), "", true},
		{"no column list, rows from a query", withSchema, &parser.Facts{Kind: parser.KindInsert, Insert: &parser.InsertFacts{FromSelect: true},
			Tables: []parser.TableRef{ref("shop", "sku_stock", true, &parser.Predicate{Unkeyed: true, Residual: true})}}, "", true},
		{"VALUES () takes every default", withSchema, positional(parser.KindInsert, []parser.Value{}), "", false},
		{"on duplicate key moves the key", withSchema, insert(parser.KindInsert, []string{"sku_id", "stock"}, [][]parser.Value{{vInt(1), vInt(1)}},
			parser.Assignment{Column: "sku_id", Kind: parser.AssignLiteral, Value: vInt(3)}), "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.rs.Match(tt.f, "shop", false)
			if d.Rule == nil || keyNames(d) != tt.keys || d.IsUnkeyed() != tt.unkeyed {
				t.Fatalf("rule=%v keys=%q unkeyed=%v (%s)", d.Rule != nil, keyNames(d), d.IsUnkeyed(), d.UnkeyedReason())
			}
		})
	}
}

func TestMatchUnparsed(t *testing.T) {
	rs := matchSet(t, Schema{})
	d := rs.MatchUnparsed(&parser.Analysis{Unparsed: true, LexTables: []parser.TableRef{{Schema: "shop", Name: "sku_stock"}}}, "shop")
	if d.Rule == nil || !d.Reject || !d.RoutePrimary || len(d.Keys) != 0 {
		t.Fatalf("unparsed statement on a guarded table: %+v", d)
	}
	if d := rs.MatchUnparsed(&parser.Analysis{Unparsed: true, LexTables: []parser.TableRef{{Schema: "shop", Name: "other"}}}, "shop"); d.Rule != nil {
		t.Fatalf("unguarded table matched %s", d.Rule.Name)
	}
}

func TestWaitTimeout(t *testing.T) {
	rs := matchSet(t, Schema{})
	f := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{
		ref("shop", "sku_stock", true, or(parser.Conj{eq("sku_id", vInt(1))})),
		ref("bank", "wallet", true, or(parser.Conj{eq("id", vInt(1))}))}}
	d := rs.Match(f, "shop", false)
	if got := d.WaitTimeout(rs.Config().Locks); got.String() != "2s" {
		t.Fatalf("WaitTimeout = %v, want the smaller rule timeout 2s", got)
	}
}

// TestSensitiveKeys: a sensitive key column enters the lock key as its
// hash, the same for a literal and a bound parameter of the same value,
// different for different values; an unusable value is not echoed.
func TestSensitiveKeys(t *testing.T) {
	cfg, err := load("s.yaml", []byte(`
users: [{user: app}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: cards
    table: pay.card
    key: [pan]
    sensitive: [PAN, holder_name]
`), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, NewSchema(&TableInfo{Schema: "pay", Name: "card", Columns: map[string]Column{
		"pan": {Name: "pan", DataType: "varchar", ColumnType: "varchar(32)", Collation: "utf8mb4_bin"},
	}, UniqueKeys: [][]string{{"pan"}}}))
	if err != nil {
		t.Fatal(err)
	}
	lit := func(s string) parser.Value {
		return parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}
	}
	match := func(v parser.Value, params ...any) Decision {
		f := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("pay", "card", true, or(parser.Conj{eq("pan", v)}))}}
		d := rs.Match(f, "pay", false)
		if d.NeedParams {
			d = d.Bind(params)
		}
		return d
	}
	a, b, c := match(lit("4111111111111111")), match(param(0), "4111111111111111"), match(lit("4111111111111112"))
	want := "cards=pay.card/" + string(HideValue([]byte("4111111111111111")))
	if keyNames(a) != want || keyNames(b) != want {
		t.Fatalf("literal %q, parameter %q; want both %q", keyNames(a), keyNames(b), want)
	}
	if keyNames(c) == want || strings.Contains(keyNames(c), "4111") {
		t.Fatalf("another value: %q", keyNames(c))
	}
	// A number against a string column names no one row; the reason says
	// so without the value.
	bad := match(param(0), int64(4111111111111111))
	if !bad.Reject || strings.Contains(bad.UnkeyedReason(), "4111") || !strings.Contains(bad.UnkeyedReason(), "sensitive") {
		t.Fatalf("reject=%v reason %q", bad.Reject, bad.UnkeyedReason())
	}
}

func TestSensitiveValidation(t *testing.T) {
	for _, c := range []struct{ rules, want string }{
		{"  - {name: a, table: t, key: [id], sensitive: [id, note]}", ""},
		{"  - {name: a, table: t, key: [id], sensitive: [id, ID]}", "listed twice"},
		{"  - {name: a, table: t, key: [id], sensitive: ['id`; x']}", "must be a plain column name"},
		{"  - {name: a, table: t, key: [id], sensitive: [id]}\n  - {name: b, table: t, key: [id]}", "differs on whether key column"},
		{"  - {name: a, table: t, key: [id], sensitive: [note]}\n  - {name: b, table: t, key: [id]}", ""},
	} {
		_, err := LoadBytes("t.yaml", []byte("users: [{user: app, password: x}]\nbackends: {primary: 127.0.0.1:3306}\nrules:\n"+c.rules+"\n"))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.rules, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: want %q, got %v", c.rules, c.want, err)
		}
	}
}

// TestMatchUnreadSchema: with the primary's schema unread, a key column's
// type and collation are unknown, so no spelling can be keyed as MariaDB
// compares it ('abc' is row 0 of an INT key, 1001 matches '1001.0' of a
// string key): every statement on a guarded table is unkeyed and its
// rule's on_unkeyed decides, a placeholder's before it is bound.
func TestMatchUnreadSchema(t *testing.T) {
	rs := matchSet(t, UnreadSchema(errors.New("dial tcp 127.0.0.1:3306: connection refused")))
	for _, v := range []parser.Value{vInt(1001), vStr("1001"), vStr("abc")} {
		f := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("shop", "sku_stock", true, or(parser.Conj{eq("sku_id", v)}))}}
		d := rs.Match(f, "shop", false)
		if !d.IsUnkeyed() || !d.Reject || len(d.Keys) != 0 || !strings.Contains(d.RejectReason(), "could not be read from the primary") {
			t.Errorf("sku_id = %s: keys %q unkeyed=%v reject=%v (%s), want refused as unkeyed", v.Text, keyNames(d), d.IsUnkeyed(), d.Reject, d.RejectReason())
		}
	}
	pf := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("shop", "sku_stock", true, or(parser.Conj{eq("sku_id", param(0))}))}}
	if d := rs.Match(pf, "shop", false); !d.Reject || len(d.Keys) != 0 {
		t.Errorf("sku_id = ?: keys %q reject=%v needParams=%v, want refused before it is bound", keyNames(d), d.Reject, d.NeedParams)
	}
	f := &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("sales", "orders", true, or(parser.Conj{eq("order_id", vInt(7)), eq("line_no", vInt(1))}))}}
	if d := rs.Match(f, "sales", false); !d.IsUnkeyed() || d.Reject || len(d.Keys) != 0 {
		t.Errorf("orders (on_unkeyed: allow): keys %q unkeyed=%v reject=%v, want unkeyed and allowed", keyNames(d), d.IsUnkeyed(), d.Reject)
	}
	// The same rules over a described schema key these statements.
	if d := matchSet(t, Schema{}).Match(f, "sales", false); d.IsUnkeyed() || len(d.Keys) != 1 {
		t.Errorf("orders over an empty schema: keys %q unkeyed=%v", keyNames(d), d.IsUnkeyed())
	}
}
