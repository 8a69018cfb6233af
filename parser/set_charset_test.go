package parser

import "testing"

// TestClientCharset: the client character set a SET names, as the
// session's later text is read in it.
func TestClientCharset(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"SET NAMES gbk", "gbk"},
		{"SET NAMES 'GBK' COLLATE 'gbk_chinese_ci'", "gbk"},
		{"SET NAMES utf8mb4", "utf8mb4"},
		{"SET CHARACTER SET gbk", "gbk"},
		{"SET character_set_client = big5", "big5"},
		{"SET SESSION character_set_client = 'latin1'", "latin1"},
		{"SET @@character_set_client = @cs", "?"},
		{"SET NAMES DEFAULT", "?"},
		{"SET autocommit = 0", ""},
		{"SET GLOBAL character_set_client = gbk", ""},
	} {
		an, err := Analyze(c.sql, "")
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if len(an.Stmts) != 1 {
			t.Fatalf("%s: %d statements (%+v)", c.sql, len(an.Stmts), an)
		}
		if got := an.Stmts[0].Effects.ClientCharset; got != c.want {
			t.Errorf("%s: ClientCharset %q, want %q", c.sql, got, c.want)
		}
	}
}
