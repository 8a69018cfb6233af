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
	} {
		at := KillCut(c.sql)
		if got := c.sql[:at]; got != c.want {
			t.Errorf("KillCut(%q) cuts after %q, want %q", c.sql, got, c.want)
		}
	}
}
