package parser

import (
	"reflect"
	"testing"
)

func TestParseExecuteImmediate(t *testing.T) {
	tests := []struct {
		sql  string
		ok   bool
		want Immediate
	}{
		{"EXECUTE IMMEDIATE 'UPDATE t SET a = 1'", true, Immediate{SQL: "UPDATE t SET a = 1"}},
		{"execute  immediate \"UPDATE t SET a = ? WHERE id = ?\" USING @a, @B", true,
			Immediate{SQL: "UPDATE t SET a = ? WHERE id = ?", Using: []string{"a", "b"}}},
		{"EXECUTE IMMEDIATE @q", true, Immediate{FromVar: "q"}},
		{"EXECUTE IMMEDIATE CONCAT('UPDATE t ', 'SET a = 1')", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'UPDATE t SET a = ?' USING 5", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'SELECT ?' USING @a; UPDATE t SET a = 0", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'SELECT 1'; UPDATE t SET a = 0", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'SELECT \"using\"' USING @x", true, Immediate{SQL: `SELECT "using"`, Using: []string{"x"}}},
		{"/* c */ EXECUTE IMMEDIATE 'DO 1'", true, Immediate{SQL: "DO 1"}},
		{"EXECUTE IMMEDIATE /*M! 'UPDATE t SET a = 0 WHERE 1 OR ' */ '1'", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'SELECT 1' -- x", true, Immediate{}},
		{"EXECUTE IMMEDIATE 'UPDATE t SET c = ''#--/*'' WHERE id = 1'", true, Immediate{SQL: "UPDATE t SET c = '#--/*' WHERE id = 1"}},
		{"EXECUTE p USING @a", false, Immediate{}},
		{"SELECT 1", false, Immediate{}},
	}
	for _, tt := range tests {
		t.Run(tt.sql, func(t *testing.T) {
			got, ok := ParseExecuteImmediate(tt.sql, 0)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseExecuteImmediate = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestParseExecuteImmediateUnderMode: the text is read under the
// session's sql_mode: under NO_BACKSLASH_ESCAPES '\' ends a string.
func TestParseExecuteImmediateUnderMode(t *testing.T) {
	got, ok := ParseExecuteImmediate(`EXECUTE IMMEDIATE 'SELECT 1, ''\' USING @x`, ModeNoBackslashEscapes)
	if want := (Immediate{SQL: `SELECT 1, '\`, Using: []string{"x"}}); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseExecuteImmediate = %+v, %v; want %+v", got, ok, want)
	}
}

func TestUserVarValues(t *testing.T) {
	a, err := Analyze("SET @a = 1001, @b = 'x', @c = 1 + 1, @d = -5, @e = ?", "shop")
	if err != nil || len(a.Stmts) != 1 {
		t.Fatalf("Analyze: %v %+v", err, a)
	}
	e := a.Stmts[0].Effects
	if !reflect.DeepEqual(e.UserVars, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("UserVars = %v", e.UserVars)
	}
	kinds := []ValueKind{ValueInt, ValueString, ValueExpr, ValueInt, ValueExpr}
	for i, k := range kinds {
		if e.UserVarValues[i].Kind != k {
			t.Errorf("@%s: kind %v, want %v", e.UserVars[i], e.UserVarValues[i].Kind, k)
		}
	}
	if e.UserVarValues[0].Int != 1001 || e.UserVarValues[1].Str != "x" || e.UserVarValues[3].Int != -5 {
		t.Fatalf("values = %+v", e.UserVarValues)
	}
}
