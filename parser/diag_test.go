package parser

import "testing"

// TestDiagnostics: the statements that only read the previous statement's
// diagnostics are told from everything else, parsed or not.
func TestDiagnostics(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"SHOW WARNINGS", true},
		{"show errors", true},
		{"SHOW COUNT(*) WARNINGS", true},
		{"SHOW COUNT(*) ERRORS", true},
		{"SELECT @@warning_count", true},
		{"SELECT @@session.error_count, @@warning_count", true},
		{"SHOW WARNINGS LIMIT 2", true},
		{"SHOW ERRORS LIMIT 1, 2", true},
		{"show warnings limit 3 offset 1;", true},
		{"SHOW WARNINGS LIMIT ?", true},
		{"SELECT @@GLOBAL.warning_count", false},
		{"SELECT @@warning_count FROM t", false},
		{"SELECT @@warning_count, 1", false},
		{"SELECT @@warning_count INTO @w", false},
		{"SHOW STATUS", false},
		{"SHOW WARNINGS LIMIT 'x'", false},
		{"SHOW WARNINGS LIMIT 1; DROP TABLE t", false},
		{"SHOW `WARNINGS`", false},
		{"GET DIAGNOSTICS @n = NUMBER", false},
	} {
		got := ShowDiagnostics(c.sql, 0)
		if an, err := Analyze(c.sql, "d"); err == nil && !an.Unparsed {
			got = len(an.Stmts) > 0
			for _, f := range an.Stmts {
				got = got && f.Diagnostics
			}
		}
		if got != c.want {
			t.Errorf("%q: diagnostics %v, want %v", c.sql, got, c.want)
		}
	}
}

// TestReadsDiagnostics: a statement that reads the previous statement's
// diagnostics anywhere is told from others, parsed or not, and names in
// strings, comments or quotes do not count.
func TestReadsDiagnostics(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"SHOW WARNINGS", true},
		{"SELECT @@warning_count", true},
		{"SELECT @@warning_count INTO @w", true},
		{"SELECT @@warning_count, 1", true},
		{"SET @e = @@error_count", true},
		{"SELECT @@SESSION.error_count + 0", true},
		{"SELECT @@local.Warning_Count", true},
		{"SELECT /*!100000 @@warning_count */", true},
		{"GET DIAGNOSTICS @n = NUMBER", true},
		{"get current diagnostics condition 1 @m = MESSAGE_TEXT", true},
		{"SELECT 1; GET DIAGNOSTICS @n = NUMBER", true},
		{"SELECT @@GLOBAL.warning_count", false},
		{"SELECT error_count FROM stats", false},
		{"UPDATE stats SET warning_count = warning_count + 1 WHERE id = 1", false},
		{"SELECT '@@warning_count'", false},
		{"SELECT 1 /* @@warning_count */", false},
		{"SELECT `@@warning_count` FROM t", false},
		{"SELECT diagnostics FROM t", false},
		{"SELECT @@max_error_count", false},
	} {
		got := ReadsDiagnostics(c.sql, 0)
		if an, err := Analyze(c.sql, "d"); err == nil && !an.Unparsed {
			parsed := false
			for _, f := range an.Stmts {
				parsed = parsed || f.ReadsDiagnostics
			}
			if parsed != c.want {
				t.Errorf("%q: analysed, reads diagnostics %v, want %v", c.sql, parsed, c.want)
			}
		}
		if got != c.want {
			t.Errorf("%q: read as text, reads diagnostics %v, want %v", c.sql, got, c.want)
		}
	}
}

// TestDerived: a statement that reads a derived table or a CTE is told
// from one that only defines a CTE or has a subquery outside FROM, and a
// CTE's name from a table of that name outside its scope.
func TestDerived(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"SELECT * FROM (SELECT 1) AS d", true},
		{"SELECT * FROM t JOIN (SELECT 1 AS a) d ON d.a = t.id", true},
		{"WITH c AS (SELECT 1) SELECT * FROM c", true},
		{"WITH c AS (SELECT 1) SELECT 1", false},
		{"WITH c AS (SELECT 1) SELECT (SELECT COUNT(*) FROM c)", true},
		{"DO (SELECT 0 FROM (SELECT 1) AS lockproxy_settle)", true},
		{"UPDATE t SET a = 1 WHERE id IN (SELECT id FROM (SELECT 1 AS id) x)", true},
		{"SELECT (SELECT 1)", false},
		{"SELECT 1 FROM DUAL WHERE EXISTS (SELECT 1)", false},
		{"SELECT * FROM t", false},
		{"SELECT * FROM c", false},
		{"SELECT * FROM db.c", false},
		{"WITH c AS (SELECT 1) SELECT * FROM db.c", false},
	} {
		an, err := Analyze(c.sql, "d")
		if err != nil || an.Unparsed {
			t.Fatalf("%q: %v", c.sql, err)
		}
		got := false
		for _, f := range an.Stmts {
			got = got || f.Derived
		}
		if got != c.want {
			t.Errorf("%q: derived %v, want %v", c.sql, got, c.want)
		}
	}
}
