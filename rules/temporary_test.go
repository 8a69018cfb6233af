package rules

import (
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// TestMayCreateTemporary: a statement may make a temporary table unseen
// when stored code it runs (a called function or procedure, a function a
// view it reads calls, a trigger on a table it writes, or code those call)
// names TEMPORARY, runs dynamic SQL or cannot be read; without the
// schema's objects any call or write may.
func TestMayCreateTemporary(t *testing.T) {
	cfg, err := load("t.yaml", []byte("users: [{user: app}]\nbackends: {primary: 127.0.0.1:3306}\n"), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema := NewSchema().WithObjects(Objects{
		Views: []View{{Schema: "s", Name: "v_mk", Definition: "select `s`.`f_mk`() AS `x`"}},
		Routines: []Routine{
			{Schema: "s", Name: "f_mk", Function: true, Body: "BEGIN CREATE TEMPORARY TABLE x (a INT); RETURN 1; END", BodyKnown: true},
			{Schema: "s", Name: "f_pure", Function: true, Body: "RETURN 1", BodyKnown: true},
			{Schema: "s", Name: "f_calls", Function: true, Body: "BEGIN CALL p_dyn(); RETURN 1; END", BodyKnown: true},
			{Schema: "s", Name: "p_dyn", Body: "BEGIN EXECUTE IMMEDIATE @q; END", BodyKnown: true},
			{Schema: "s", Name: "f_hidden", Function: true},
		},
		Triggers: []Trigger{{Schema: "s", Name: "trg", Table: "t_trg", Event: "INSERT", Body: "CREATE TEMPORARY TABLE y (a INT)"}},
	})
	rs, err := Compile(cfg, schema)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Compile(cfg, Schema{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql         string
		want, known bool // with the objects; without them
	}{
		{"SELECT f_mk()", true, true},
		{"SELECT f_pure()", false, true},
		{"SELECT f_calls()", true, true},
		{"SELECT f_hidden()", true, true},
		{"SELECT x FROM v_mk", true, false},
		{"INSERT INTO t_trg VALUES (1)", true, true},
		{"INSERT INTO t_plain VALUES (1)", false, true},
		{"SELECT a FROM t_trg", false, false},
		{"CALL p_dyn()", true, true},
	} {
		an, err := parser.Analyze(c.sql, "s")
		if err != nil || an.Unparsed || len(an.Stmts) != 1 {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if got := rs.MayCreateTemporary(an.Stmts[0], "s"); got != c.want {
			t.Errorf("%s: %v with the objects, want %v", c.sql, got, c.want)
		}
		if got := bare.MayCreateTemporary(an.Stmts[0], "s"); got != c.known {
			t.Errorf("%s: %v without the objects, want %v", c.sql, got, c.known)
		}
	}
	for _, c := range []struct {
		text string
		want bool
	}{
		{"CREATE OR REPLACE TEMPORARY TABLE x (a INT)", true},
		{"SELECT f_pure() FROM t WHERE a = x'1g'", false},
		{"SELECT f_mk() FROM t WHERE a = x'1g'", true},
		{"INSERT INTO t_trg VALUES (x'1g')", true},
		{"SELECT 1 FROM t_plain WHERE a = x'1g'", false},
	} {
		if got := rs.MayCreateTemporaryText(c.text, "s"); got != c.want {
			t.Errorf("%s: %v, want %v", c.text, got, c.want)
		}
		if !bare.MayCreateTemporaryText(c.text, "s") {
			t.Errorf("%s: without the objects, false", c.text)
		}
	}
}
