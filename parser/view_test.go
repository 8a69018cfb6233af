package parser

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestCallsAndProcedure(t *testing.T) {
	tests := []struct {
		sql, db   string
		procedure string
		calls     string
	}{
		{sql: "CALL p()", db: "shop", procedure: "shop.p"},
		{sql: "CALL other.P(f(1), 2)", db: "shop", procedure: "other.p", calls: "shop.f"},
		{sql: "CALL p", db: "", procedure: "p"},
		{sql: "SELECT f(sku_id), db2.g(1), NOW() FROM t", db: "shop", calls: "shop.f db2.g shop.now"},
		{sql: "UPDATE t SET x = f(x) WHERE id = F(1)", db: "shop", calls: "shop.f"},
		{sql: "SET @a = f()", db: "shop", calls: "shop.f"},
		{sql: "DO x.f()", db: "", calls: "x.f"},
		{sql: "SELECT 1", db: "shop"},
	}
	for _, tt := range tests {
		t.Run(tt.sql, func(t *testing.T) {
			a, err := Analyze(tt.sql, tt.db)
			if err != nil || a.Unparsed || len(a.Stmts) != 1 {
				t.Fatalf("Analyze: %v %s", err, a.ParseError)
			}
			f := a.Stmts[0]
			if f.Procedure != tt.procedure || strings.Join(f.Calls, " ") != tt.calls {
				t.Fatalf("procedure %q calls %q, want %q %q", f.Procedure, strings.Join(f.Calls, " "), tt.procedure, tt.calls)
			}
		})
	}
}

func TestLexNames(t *testing.T) {
	got := LexNames("BEGIN UPDATE `shop`.sku_stock SET stock = 'x.y' WHERE id = NEW.id; -- other.t\n CALL q(); END")
	want := []string{"begin", "update", "shop", "sku_stock", "shop.sku_stock", "set", "stock", "where", "id",
		"new", "new.id", "call", "q", "end"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = LexNames("a.b.c")
	if want := []string{"a", "b", "a.b", "c", "b.c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestViewProjection(t *testing.T) {
	tests := []struct {
		def    string
		table  string
		cols   map[string]string
		reason string
	}{
		{def: "select `shop`.`sku_stock`.`sku_id` AS `id`,`shop`.`sku_stock`.`stock` AS `stock` from `shop`.`sku_stock` where `shop`.`sku_stock`.`stock` > 0",
			table: "shop.sku_stock", cols: map[string]string{"id": "sku_id", "stock": "stock"}},
		{def: "SELECT sku_id, stock FROM sku_stock", table: "shop.sku_stock",
			cols: map[string]string{"sku_id": "sku_id", "stock": "stock"}},
		{def: "SELECT sku_id, SUM(stock) AS s FROM sku_stock GROUP BY sku_id", reason: "groups"},
		{def: "SELECT DISTINCT sku_id FROM sku_stock", reason: "DISTINCT"},
		{def: "SELECT a.sku_id FROM sku_stock a JOIN other b ON a.sku_id = b.id", reason: "reads 2 tables"},
		{def: "SELECT sku_id, stock + 1 AS s FROM sku_stock", reason: "plain columns"},
		{def: "SELECT sku_id FROM sku_stock WHERE sku_id IN (SELECT id FROM other)", reason: "reads 2 tables"},
		{def: "SELECT sku_id FROM sku_stock UNION SELECT id FROM other", reason: "reads 2 tables"},
		{def: "SELECT sku_id FROM sku_stock LIMIT 3", reason: "LIMIT"},
		{def: "SELECT * FROM sku_stock", reason: "plain columns"},
		{def: "SELECT sku_id FROM (SELECT sku_id FROM sku_stock) d", reason: "derived"},
	}
	for _, tt := range tests {
		t.Run(tt.def, func(t *testing.T) {
			p, why := ViewProjection(tt.def, "shop")
			if tt.reason != "" {
				if p != nil || !strings.Contains(why, tt.reason) {
					t.Fatalf("got %+v %q, want no projection because %q", p, why, tt.reason)
				}
				return
			}
			if p == nil || p.Schema+"."+p.Table != tt.table || !reflect.DeepEqual(p.Columns, tt.cols) {
				t.Fatalf("got %+v (%s)", p, why)
			}
		})
	}
}

func TestProcedureDDL(t *testing.T) {
	for _, sql := range []string{"CREATE PROCEDURE p() BEGIN UPDATE sku SET stock = f(0) WHERE sku_id = 1; END", "DROP PROCEDURE p"} {
		a, err := Analyze(sql, "db")
		if err != nil || a.Unparsed {
			t.Fatalf("%s: %v %s", sql, err, a.ParseError)
		}
		if f := a.Stmts[0]; f.Kind != KindDDL || !f.ImplicitCommit {
			t.Errorf("%s: kind %s implicit commit %v, want DDL that commits", sql, f.Kind, f.ImplicitCommit)
		}
	}
}

// TestLexNamesEveryReading: a name the server reads as code under some
// sql_mode or character set is found, though another reading puts it in
// a string: under NO_BACKSLASH_ESCAPES '\' is a whole string, under
// ANSI_QUOTES "x" a name, in gbk 0xbf5c one character.
func TestLexNamesEveryReading(t *testing.T) {
	for _, text := range []string{
		`SELECT '\'; UPDATE sku_stock SET stock = 0; #'`,
		`SELECT "\"; UPDATE sku_stock SET stock = 0; #"`,
		"SELECT '\xbf\x5c'; UPDATE sku_stock SET stock = 0; #'",
	} {
		if !slices.Contains(LexNames(text), "sku_stock") {
			t.Errorf("LexNames(%q) = %q: sku_stock missing", text, LexNames(text))
		}
		if !HasDynamicSQL(strings.Replace(text, "UPDATE", "EXECUTE s; UPDATE", 1)) {
			t.Errorf("HasDynamicSQL: the EXECUTE of %q not seen", text)
		}
	}
	if HasDynamicSQL(`SELECT 'EXECUTE s', "CALL p()" /* PREPARE */`) {
		t.Error("HasDynamicSQL: words inside literals and comments under every reading counted")
	}
}
