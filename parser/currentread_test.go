package parser

import "testing"

func TestCurrentReadText(t *testing.T) {
	const L = " LOCK IN SHARE MODE"
	cases := []struct {
		in, want string
	}{
		{"SELECT bal FROM bank_acct WHERE id = 1", "SELECT bal FROM bank_acct WHERE id = 1" + L},
		{"select * from t where id = ? order by id limit 1 ; ", "select * from t where id = ? order by id limit 1" + L},
		{"SELECT a.bal, b.bal FROM t a JOIN t b ON b.id = 2 WHERE a.id = 1", "SELECT a.bal, b.bal FROM t a JOIN t b ON b.id = 2 WHERE a.id = 1" + L},
		{"SELECT COUNT(*) FROM t WHERE id IN (1, 2) GROUP BY id WITH ROLLUP", "SELECT COUNT(*) FROM t WHERE id IN (1, 2) GROUP BY id WITH ROLLUP" + L},
		// Every block that reads a table gets its own clause.
		{"SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1)", "SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1" + L + ")" + L},
		{"SELECT bal FROM t WHERE id = (SELECT 1)", "SELECT bal FROM t WHERE id = (SELECT 1)" + L},
		{"SELECT (SELECT bal FROM t WHERE id = 1) AS b", "SELECT (SELECT bal FROM t WHERE id = 1" + L + ") AS b"},
		{"SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id ORDER BY u.id LIMIT 1)", "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id ORDER BY u.id LIMIT 1" + L + ")" + L},
		{"SELECT COALESCE((SELECT bal FROM t WHERE id = 1), 0) + EXTRACT(YEAR FROM NOW())", "SELECT COALESCE((SELECT bal FROM t WHERE id = 1" + L + "), 0) + EXTRACT(YEAR FROM NOW())"},
		{"SELECT * FROM (SELECT bal FROM t WHERE id = 1) d", "SELECT * FROM (SELECT bal FROM t WHERE id = 1" + L + ") d" + L},
		{"SELECT * FROM ((SELECT bal FROM t WHERE id = 1) UNION (SELECT bal FROM t WHERE id = 2)) d", "SELECT * FROM ((SELECT bal FROM t WHERE id = 1" + L + ") UNION (SELECT bal FROM t WHERE id = 2" + L + ")) d" + L},
		{"WITH c AS (SELECT bal FROM t WHERE id = 1) SELECT * FROM c", "WITH c AS (SELECT bal FROM t WHERE id = 1" + L + ") SELECT * FROM c" + L},
		{"WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT n FROM c",
			"WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL (SELECT n + 1 FROM c WHERE n < 3" + L + ")) SELECT n FROM c" + L},
		{"(SELECT bal FROM t WHERE id = 1)", "(SELECT bal FROM t WHERE id = 1" + L + ")"},
		{"SELECT bal FROM t WHERE id = 1 UNION SELECT bal FROM t WHERE id = 2",
			"(SELECT bal FROM t WHERE id = 1 " + L + ")UNION (SELECT bal FROM t WHERE id = 2" + L + ")"},
		{"SELECT bal FROM t WHERE id = 1 UNION ALL SELECT bal FROM t WHERE id = 2 ORDER BY 1 LIMIT 1",
			"(SELECT bal FROM t WHERE id = 1 " + L + ")UNION ALL (SELECT bal FROM t WHERE id = 2 " + L + ")ORDER BY 1 LIMIT 1"},
		{"(SELECT bal FROM t WHERE id = 1) UNION (SELECT bal FROM t WHERE id = 2 LIMIT 1) ORDER BY 1",
			"(SELECT bal FROM t WHERE id = 1" + L + ") UNION (SELECT bal FROM t WHERE id = 2 LIMIT 1" + L + ") ORDER BY 1"},
		{"SELECT bal FROM t WHERE id = 1 UNION SELECT 7", "(SELECT bal FROM t WHERE id = 1 " + L + ")UNION SELECT 7"},
		// A block that has a clause keeps it; the others get theirs.
		{"SELECT bal FROM t WHERE id = 1 FOR UPDATE", "SELECT bal FROM t WHERE id = 1 FOR UPDATE"},
		{"SELECT bal FROM t WHERE id = 1 LOCK IN SHARE MODE", "SELECT bal FROM t WHERE id = 1 LOCK IN SHARE MODE"},
		{"SELECT bal, (SELECT v FROM u WHERE id = 2) FROM t WHERE id = 1 FOR UPDATE", "SELECT bal, (SELECT v FROM u WHERE id = 2" + L + ") FROM t WHERE id = 1 FOR UPDATE"},
		{"SELECT bal FROM t WHERE id = 1 UNION SELECT bal FROM t WHERE id = 2 FOR UPDATE",
			"(SELECT bal FROM t WHERE id = 1 " + L + ")UNION SELECT bal FROM t WHERE id = 2 FOR UPDATE"},
		// Strings, quoted names and comments hold no tokens to edit.
		{"SELECT ')', `a(b` FROM t WHERE id = (SELECT id FROM u WHERE s = 'x)' )", "SELECT ')', `a(b` FROM t WHERE id = (SELECT id FROM u WHERE s = 'x)' " + L + ")" + L},
		// Not made current.
		{"SELECT bal FROM t WHERE id = 1 INTO @b", ""}, // the parser reads no clause after INTO
		{"SELECT bal FROM t WHERE id = 1 INTO OUTFILE '/tmp/x'", ""},
		{"SELECT * FROM (SELECT bal FROM t WHERE id = 1 INTO @b) d", ""},
		{"UPDATE t SET bal = 1 WHERE id = 1", ""},
		{"SELECT bal FROM t WHERE id = 1; SELECT 2", ""},
		{"SELECT bal FROM t WHERE id = 'x", ""},
	}
	for _, c := range cases {
		got, ok := CurrentReadText(c.in, 0)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("CurrentReadText(%q)\n = %q, %v\nwant %q", c.in, got, ok, c.want)
		}
	}
}

// TestCurrentReadOfShape: the edit proven on a statement's Text applies
// to every text of its shape, and a text whose tokens do not line up is
// refused, never edited at a guess.
func TestCurrentReadOfShape(t *testing.T) {
	c := NewCache(16)
	const first = "SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1) AND s = 'ab'"
	const second = "SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1234) AND s = 'x) UNION SELECT ('"
	if _, _, err := c.AnalyzeShaped(first, "db", Options{}); err != nil {
		t.Fatal(err)
	}
	a, params, err := c.AnalyzeShaped(second, "db", Options{})
	if err != nil || params == nil {
		t.Fatalf("second text of the shape: params %v, %v", params, err)
	}
	f := a.Stmts[0]
	if !f.CurrentReadOK() {
		t.Fatalf("%s: not current", f.Text)
	}
	got, ok := f.AsCurrentRead(second)
	want := "SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1234 LOCK IN SHARE MODE) AND s = 'x) UNION SELECT (' LOCK IN SHARE MODE"
	if !ok || got != want {
		t.Errorf("shaped text: %q, %v; want %q", got, ok, want)
	}
	if got, ok := f.AsCurrentRead("SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1) AND s = 'ab' AND 1"); ok {
		t.Errorf("text of another shape edited: %q", got)
	}
	u, err := Analyze("UPDATE t SET bal = 1 WHERE id = 1", "db")
	if err != nil {
		t.Fatal(err)
	}
	if u.Stmts[0].CurrentReadOK() {
		t.Error("UPDATE made a current read")
	}
}

// FuzzCurrentReadText: whatever the text, an edit CurrentReadText returns
// parses to one statement in which every block that reads a table has a
// locking clause.
func FuzzCurrentReadText(f *testing.F) {
	for _, s := range []string{
		"SELECT bal FROM t WHERE id = (SELECT id FROM u WHERE k = 1)",
		"SELECT bal FROM t WHERE id = 1 UNION ALL SELECT bal FROM t WHERE id = 2 ORDER BY 1 LIMIT 1",
		"WITH c AS (SELECT bal FROM t WHERE id = 1) SELECT * FROM c, (SELECT 1 FROM u) d",
		"SELECT (SELECT 1 FROM t UNION SELECT 2 FROM u) FROM v",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := CurrentReadText(s, 0)
		if !ok {
			return
		}
		st, err := Parse(got)
		if err != nil || len(st) != 1 {
			t.Fatalf("%q -> %q: %v", s, got, err)
		}
		v := &blockLocker{}
		st[0].Accept(v)
		if v.locked != 0 || v.refuse {
			t.Fatalf("%q -> %q: a block without a clause", s, got)
		}
	})
}

// TestCurrentReadTextUnderMode: the text's tokens are read under the
// session's sql_mode: under NO_BACKSLASH_ESCAPES '\' ends a string, and
// the blocks after it get their clauses.
func TestCurrentReadTextUnderMode(t *testing.T) {
	const L = " LOCK IN SHARE MODE"
	in := `SELECT bal FROM t WHERE s = '\' AND id = (SELECT id FROM u WHERE k = 1)`
	want := `SELECT bal FROM t WHERE s = '\' AND id = (SELECT id FROM u WHERE k = 1` + L + ")" + L
	if got, ok := CurrentReadText(in, ModeNoBackslashEscapes); !ok || got != want {
		t.Errorf("CurrentReadText(%q) = %q, %v; want %q", in, got, ok, want)
	}
}
