package parser

import "testing"

func TestCurrentReadText(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"SELECT bal FROM bank_acct WHERE id = 1", "SELECT bal FROM bank_acct WHERE id = 1 LOCK IN SHARE MODE"},
		{"select * from t where id = ? order by id limit 1 ; ", "select * from t where id = ? order by id limit 1 LOCK IN SHARE MODE"},
		{"SELECT a.bal, b.bal FROM t a JOIN t b ON b.id = 2 WHERE a.id = 1", "SELECT a.bal, b.bal FROM t a JOIN t b ON b.id = 2 WHERE a.id = 1 LOCK IN SHARE MODE"},
		{"SELECT bal FROM t WHERE id = 1 INTO @b", ""}, // the parser reads no clause after INTO
		{"SELECT COUNT(*) FROM t WHERE id IN (1, 2) GROUP BY id WITH ROLLUP", "SELECT COUNT(*) FROM t WHERE id IN (1, 2) GROUP BY id WITH ROLLUP LOCK IN SHARE MODE"},
		// More than one query block, or a clause already there: not
		// by appending.
		{"SELECT bal FROM t WHERE id = 1 UNION SELECT bal FROM t WHERE id = 2", ""},
		{"SELECT bal FROM t WHERE id = (SELECT 1)", ""},
		{"SELECT * FROM (SELECT bal FROM t WHERE id = 1) d", ""},
		{"WITH c AS (SELECT bal FROM t WHERE id = 1) SELECT * FROM c", ""},
		{"(SELECT bal FROM t WHERE id = 1)", ""},
		{"SELECT bal FROM t WHERE id = 1 FOR UPDATE", ""},
		{"SELECT bal FROM t WHERE id = 1 LOCK IN SHARE MODE", ""},
		{"SELECT bal FROM t WHERE id = 1 INTO OUTFILE '/tmp/x'", ""},
		{"UPDATE t SET bal = 1 WHERE id = 1", ""},
		{"SELECT bal FROM t WHERE id = 1; SELECT 2", ""},
		{"SELECT bal FROM t WHERE id = 'x", ""},
	}
	for _, c := range cases {
		got, ok := CurrentReadText(c.in, 0)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("CurrentReadText(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
}

func TestOneBlockFact(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT bal FROM t WHERE id = 1":                         true,
		"SELECT bal FROM t WHERE id IN (SELECT id FROM u)":       false,
		"SELECT bal FROM t WHERE id = 1 UNION SELECT 1":          false,
		"SELECT bal FROM t WHERE id = 1 FOR UPDATE":              false,
		"SELECT bal FROM t JOIN u ON u.id = t.id WHERE t.id = 1": true,
	} {
		a, err := Analyze(sql, "db")
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Stmts[0].OneBlock; got != want {
			t.Errorf("%q: OneBlock = %v, want %v", sql, got, want)
		}
	}
}
