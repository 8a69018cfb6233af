package parser

import "testing"

func TestKillCut(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string // the text before the cut; "" for none
	}{
		{"KILL 5", ""},
		{"KILL 5;", ""},
		{"SELECT 1; SELECT 2", ""},
		{"kill 5; select sleep(0.05)", "kill 5;"},
		{"SELECT 1; KILL QUERY 5; SELECT 2", "SELECT 1;"},
		{"SELECT 'kill'; SELECT 2", ""},
		{"KILL HARD QUERY 5; SELECT 2", "KILL HARD QUERY 5;"},
		{"SELECT ';kill 1'; KILL SOFT 5", "SELECT ';kill 1';"},
		{"/* x */ KILL 5 ; DO 1", "/* x */ KILL 5 ;"},
		{"SELECT 1; KILL 5 -- trailing", "SELECT 1;"},
		{"CREATE PROCEDURE p() BEGIN KILL HARD 5; SELECT 1; END", ""},
		// A comment after the KILL's ';' is a statement of its own to
		// MariaDB: it is sent on. White space is not; nor is a comment
		// inside the KILL's own statement.
		{"KILL 5; -- c", "KILL 5;"},
		{"KILL 5; /* c */", "KILL 5;"},
		{"KILL 5;  \t\n", ""},
		{"KILL 5 -- c", ""},
		{"KILL 5 /* c */ ;", ""},
	} {
		at := KillCut(c.sql, ScanOptions{})
		if got := c.sql[:at]; got != c.want {
			t.Errorf("KillCut(%q) cuts after %q, want %q", c.sql, got, c.want)
		}
	}
}

// TestKillCutReadsAsTheServer: where a string ends is the session's
// server's reading: under NO_BACKSLASH_ESCAPES '\' is a whole string, and
// in gbk 0xbf5c is one character whose second byte is no backslash. Read
// any other way, the KILL after it hides inside a string and reaches the
// server untranslated.
func TestKillCutReadsAsTheServer(t *testing.T) {
	for _, c := range []struct {
		name string
		sql  string
		o    ScanOptions
		want string
	}{
		{"NO_BACKSLASH_ESCAPES", `SELECT '\'; KILL 5; -- '`, ScanOptions{Mode: ModeNoBackslashEscapes}, `SELECT '\';`},
		{"default mode", `SELECT '\'; KILL 5; -- '`, ScanOptions{}, ""},
		{"gbk", "SELECT '\xbf\x5c'; KILL 5; -- '", ScanOptions{Charset: "gbk"}, "SELECT '\xbf\x5c';"},
		{"latin1", "SELECT '\xbf\x5c'; KILL 5; -- '", ScanOptions{Charset: "latin1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := KillCut(c.sql, c.o)
			if got := c.sql[:at]; got != c.want {
				t.Errorf("KillCut(%q) cuts after %q, want %q", c.sql, got, c.want)
			}
		})
	}
}
