package parser

import (
	"strings"
	"testing"
)

// TestSetStatement: MariaDB's SET STATEMENT ... FOR is read as the
// statement it runs when it sets statement-scoped variables to literals;
// that statement is Wrapped, keyed as itself, and refused by everything
// that would send lockproxy's own text in its place. Any other SET
// STATEMENT stays a text the parser rejects.
func TestSetStatement(t *testing.T) {
	o := Options{ServerVersion: 101106}
	for _, c := range []struct {
		sql   string
		kind  Kind
		stmts int
	}{
		{"SET STATEMENT max_statement_time=10 FOR UPDATE sku_stock SET stock = 7 WHERE sku_id = 5", KindUpdate, 1},
		{"/* c */ set statement innodb_lock_wait_timeout = 5, max_statement_time = 1.5 FOR SELECT * FROM sku_stock WHERE sku_id = 5 FOR UPDATE", KindSelect, 1},
		{"SET STATEMENT optimizer_switch='index_merge=off' FOR DELETE FROM sku_stock WHERE sku_id = 'a'", KindDelete, 1},
		{"SET STATEMENT max_statement_time=10 FOR SELECT 1; UPDATE sku_stock SET stock = 1 WHERE sku_id = 2", KindSelect, 2},
	} {
		a, err := AnalyzeWith(c.sql, "shop", o)
		if err != nil {
			t.Fatal(err)
		}
		if a.Unparsed || len(a.Stmts) != c.stmts || a.Stmts[0].Kind != c.kind || !a.Stmts[0].Wrapped {
			t.Errorf("%q: unparsed %v (%s), %d statements, want %d of which the first a wrapped %s", c.sql, a.Unparsed, a.ParseError, len(a.Stmts), c.stmts, c.kind)
			continue
		}
		f := a.Stmts[0]
		if len(f.Tables) > 0 && f.Tables[0].Name != "sku_stock" {
			t.Errorf("%q: tables %+v", c.sql, f.Tables)
		}
		if strings.Contains(strings.ToLower(f.Text), "statement") {
			t.Errorf("%q: Text %q holds the prefix", c.sql, f.Text)
		}
		if f.CurrentReadOK() {
			t.Errorf("%q: a wrapped statement may not be sent as a current read", c.sql)
		}
		if c.stmts > 1 && a.Stmts[1].Wrapped {
			t.Errorf("%q: SET STATEMENT applies to the first statement only", c.sql)
		}
	}
	for _, sql := range []string{
		"SET STATEMENT sql_mode='ANSI' FOR SELECT 1",
		"SET STATEMENT time_zone='+01:00' FOR UPDATE sku_stock SET stock = 1 WHERE sku_id = 5",
		"SET STATEMENT collation_connection=utf8mb4_bin FOR SELECT 1",
		"SET STATEMENT max_statement_time=(SELECT 10) FOR SELECT 1",
		"SET STATEMENT max_statement_time=@t FOR SELECT 1",
		"SET STATEMENT max_statement_time=? FOR SELECT 1",
		"SET STATEMENT max_statement_time=10 SELECT 1",
		"SET STATEMENT FOR SELECT 1",
	} {
		a, err := AnalyzeWith(sql, "shop", o)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Unparsed {
			t.Errorf("%q: read as %d statements, want it rejected as before", sql, len(a.Stmts))
		}
	}
}

// TestWrappedNotReplaced: lockproxy builds no text of its own for a
// wrapped UPDATE: no rewrite, no fence, no combined batch.
func TestWrappedNotReplaced(t *testing.T) {
	a, err := AnalyzeWith("SET STATEMENT max_statement_time=10 FOR UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 5", "shop", Options{ServerVersion: 101106})
	if err != nil || a.Unparsed || len(a.Stmts) != 1 {
		t.Fatalf("analysis %+v, %v", a, err)
	}
	f := a.Stmts[0]
	if _, ok, reason, err := RewriteGuarded(f, RewriteSpec{Column: "stock", Mode: RewriteDelta, Old: []byte("10"), Key: []string{"sku_id"}}, []any{}); ok || reason != ReasonWrapped || err != nil {
		t.Errorf("RewriteGuarded: ok %v, reason %q, err %v", ok, reason, err)
	}
	if _, _, ok, reason, err := FenceUpdate(f, "fence", 7, []any{}); ok || reason != ReasonWrapped || err != nil {
		t.Errorf("FenceUpdate: ok %v, reason %q, err %v", ok, reason, err)
	}
	if _, reason, err := CombineUpdate(f, "stock", []string{"sku_id"}, []any{}); reason != CombineWrapped || err != nil {
		t.Errorf("CombineUpdate: reason %q, err %v", reason, err)
	}
}
