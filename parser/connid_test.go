package parser

import "testing"

func TestReplaceConnectionID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT CONNECTION_ID()", "SELECT 42 AS `CONNECTION_ID()`"},
		{"select connection_id( ) as id", "select 42 as id"},
		{"SELECT 1, Connection_Id() FROM t WHERE x = 1", "SELECT 1, 42 AS `Connection_Id()` FROM t WHERE x = 1"},
		{"SELECT CONNECTION_ID() id", "SELECT 42 id"},
		// A string alias: MariaDB names the column c, and refuses a
		// second alias after AS `CONNECTION_ID()`.
		{"SELECT CONNECTION_ID() 'c'", "SELECT 42 'c'"},
		{"SELECT CONNECTION_ID() \"c\", 1", "SELECT 42 \"c\", 1"},
		{"SELECT CONNECTION_ID()+1", "SELECT 42+1"},
		{"SELECT CONCAT('a', CONNECTION_ID())", "SELECT CONCAT('a', 42)"},
		{"SELECT x FROM t WHERE id = CONNECTION_ID()", "SELECT x FROM t WHERE id = 42"},
		{"SELECT (SELECT CONNECTION_ID()) AS c", "SELECT (SELECT 42 AS `CONNECTION_ID()`) AS c"},
		{"KILL CONNECTION_ID()", "KILL 42"},
		{"KILL QUERY CONNECTION_ID()", "KILL QUERY 42"},
		{"SELECT CONNECTION_ID(); SELECT 2", "SELECT 42 AS `CONNECTION_ID()`; SELECT 2"},
		{"SELECT 'CONNECTION_ID()', `CONNECTION_ID()` FROM t /* CONNECTION_ID() */", ""},
		{"SELECT db.CONNECTION_ID()", ""},
		{"SELECT CONNECTION_ID", ""},
		{"CREATE PROCEDURE p() SELECT CONNECTION_ID()", ""},
		{"CREATE TABLE t (c INT DEFAULT (CONNECTION_ID()))", ""},
		{"INSERT INTO t VALUES (CONNECTION_ID())", "INSERT INTO t VALUES (42)"},
		{"SELECT /*!100000 CONNECTION_ID() */", "SELECT /*!100000 42 AS `CONNECTION_ID()` */"},
	}
	for _, tt := range tests {
		got, ok := ReplaceConnectionID(tt.in, 42, ScanOptions{})
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got != want || ok != (tt.want != "") {
			t.Errorf("ReplaceConnectionID(%q) = %q, %v; want %q", tt.in, got, ok, want)
		}
	}
}

// TestReplaceConnectionIDReadsAsTheServer: a call inside a string literal
// as the session's server reads it is never replaced (that would change
// the literal's value), and one outside is: under NO_BACKSLASH_ESCAPES
// '\' is a whole string, in gbk 0xbf5c is one character; under a sql_mode
// lockproxy cannot read with certainty nothing is replaced.
func TestReplaceConnectionIDReadsAsTheServer(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		o              ScanOptions
	}{
		{"NO_BACKSLASH_ESCAPES, call in a literal", `INSERT INTO t VALUES ('\', 'CONNECTION_ID()', '\')`, "", ScanOptions{Mode: ModeNoBackslashEscapes}},
		{"NO_BACKSLASH_ESCAPES, call in code", `SELECT '\', CONNECTION_ID() AS c, '\'`, `SELECT '\', 42 AS c, '\'`, ScanOptions{Mode: ModeNoBackslashEscapes}},
		{"gbk, call in a literal", "INSERT INTO t VALUES ('\xbf\x5c', 'CONNECTION_ID()', '\xbf\x5c')", "", ScanOptions{Charset: "gbk"}},
		{"gbk, call in code", "SELECT '\xbf\x5c', CONNECTION_ID() AS c", "SELECT '\xbf\x5c', 42 AS c", ScanOptions{Charset: "gbk"}},
		{"sql_mode ORACLE", "SELECT CONNECTION_ID() AS c", "", ScanOptions{Mode: ModeOracle}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ReplaceConnectionID(c.in, 42, c.o)
			want := c.want
			if want == "" {
				want = c.in
			}
			if got != want || ok != (c.want != "") {
				t.Errorf("ReplaceConnectionID(%q) = %q, %v; want %q", c.in, got, ok, want)
			}
		})
	}
}

func FuzzReplaceConnectionID(f *testing.F) {
	f.Add("SELECT CONNECTION_ID(), 'x' FROM t")
	f.Add("KILL `a`CONNECTION_ID()")
	f.Fuzz(func(t *testing.T, sql string) {
		got, ok := ReplaceConnectionID(sql, 7, ScanOptions{})
		if !ok && got != sql {
			t.Fatalf("unchanged text altered: %q -> %q", sql, got)
		}
	})
}

func TestReplaceUsedLock(t *testing.T) {
	ours := usedLock("IS_USED_LOCK('a')")
	tests := []struct{ in, want string }{
		{"SELECT IS_USED_LOCK('a')", "SELECT " + ours + " AS `IS_USED_LOCK('a')`"},
		{"SELECT IS_USED_LOCK('a') = 42", "SELECT " + ours + " = 42"},
		{"SELECT IS_USED_LOCK('a') AS h", "SELECT " + ours + " AS h"},
		{"SELECT is_used_lock(CONCAT('a', (1))) x FROM t", "SELECT " + usedLock("is_used_lock(CONCAT('a', (1)))") + " x FROM t"},
		{"SELECT x FROM t WHERE IS_USED_LOCK(?) IS NULL", "SELECT x FROM t WHERE " + usedLock("IS_USED_LOCK(?)") + " IS NULL"},
		{"SELECT 'IS_USED_LOCK(1)', `IS_USED_LOCK`(1) /* IS_USED_LOCK(1) */", ""},
		{"SELECT IS_USED_LOCK()", ""},
		{"SELECT IS_USED_LOCK('a'", ""},
		{"SELECT db.IS_USED_LOCK('a')", ""},
		{"CREATE VIEW v AS SELECT IS_USED_LOCK('a')", ""},
	}
	for _, tt := range tests {
		got, ok := ReplaceUsedLock(tt.in, 7, 42, ScanOptions{})
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got != want || ok != (tt.want != "") {
			t.Errorf("ReplaceUsedLock(%q) = %q, %v; want %q", tt.in, got, ok, want)
		}
	}
}

// usedLock is what ReplaceUsedLock makes of call for thread 7, id 42.
func usedLock(call string) string {
	return "CAST(TRIM(BOTH '#' FROM REPLACE(CONCAT('#', " + call + ", '#'), '#7#', '42')) AS SIGNED)"
}

func FuzzReplaceUsedLock(f *testing.F) {
	f.Add("SELECT IS_USED_LOCK('a'), 'x' FROM t")
	f.Add("SELECT IS_USED_LOCK((()")
	f.Fuzz(func(t *testing.T, sql string) {
		got, ok := ReplaceUsedLock(sql, 7, 42, ScanOptions{})
		if !ok && got != sql {
			t.Fatalf("unchanged text altered: %q -> %q", sql, got)
		}
	})
}
