package parser

import (
	"strings"
	"testing"
)

// squeeze collapses blank runs, so a blanked text compares with what it
// reads as.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

var v101106 = Options{ServerVersion: 101106}

func TestExpand(t *testing.T) {
	nbe := Options{Mode: ModeNoBackslashEscapes, ServerVersion: 101106}
	ansi := Options{Mode: ModeANSIQuotes, ServerVersion: 101106}
	cases := []struct {
		name, sql string
		o         Options
		want      string
		uncertain bool
	}{
		{"no comment", "SELECT 1", v101106, "SELECT 1", false},
		{"plain comment", "SELECT 1 /* +1 */ +2", v101106, "SELECT 1 +2", false},
		{"bang runs", "SELECT 1 /*! +1 */", v101106, "SELECT 1 +1", false},
		{"M bang runs", "SELECT 1 /*M! +1 */", v101106, "SELECT 1 +1", false},
		{"lower m is a comment", "SELECT 1 /*m! +1 */", v101106, "SELECT 1", false},
		{"T bang is a comment", "SELECT 1 /*T! +1 */", v101106, "SELECT 1", false},
		{"optimizer hint is a comment", "SELECT /*+ MAX_EXECUTION_TIME(1) */ 1", v101106, "SELECT 1", false},
		{"5 digits old", "SELECT 1 /*!40000 +1 */", v101106, "SELECT 1 +1", false},
		{"5 digits MySQL 5.7 skipped", "SELECT 1 /*!50700 +1 */", v101106, "SELECT 1", false},
		{"5 digits MySQL 5.7 with M runs", "SELECT 1 /*M!50700 +1 */", v101106, "SELECT 1 +1", false},
		{"6 digits at version", "SELECT 1 /*!101106 +1 */", v101106, "SELECT 1 +1", false},
		{"6 digits past version", "SELECT 1 /*!101107 +1 */", v101106, "SELECT 1", false},
		{"M 6 digits past version", "SELECT 1 /*M!101107 +1 */", v101106, "SELECT 1", false},
		{"6 digits future", "SELECT 1 /*!999999 +1 */", v101106, "SELECT 1", false},
		{"7 digits: the 7th is content", "SELECT 1 /*!1000000 +1 */", v101106, "SELECT 1 0 +1", false},
		{"4 digits: no version", "SELECT 1 /*!4000 +1 */", v101106, "SELECT 1 4000 +1", false},
		{"skipped version holds one comment", "SELECT 1 /*!999999 /* +1 */ +2 */ +4", v101106, "SELECT 1 +4", false},
		{"skipped version ends in a string", "SELECT 1 /*!999999 + LENGTH('*/') */", v101106, "SELECT 1 ') */", false},
		{"run comment ends after a string", "SELECT 1 /*! + LENGTH('*/') */", v101106, "SELECT 1 + LENGTH('*/')", false},
		{"plain comment inside a run one", "SELECT 1 /*! +1 /* +2 */ +4 */", v101106, "SELECT 1 +1 +4", false},
		{"skipped version inside a run one", "SELECT 1 /*! +1 /*!999999 +2 */ +4 */", v101106, "SELECT 1 +1 +4", false},
		{"plain comments do not nest", "SELECT 1 /* /* +1 */ +2 */", v101106, "SELECT 1 +2 */", false},
		{"dash dash digit", "SELECT 1 --1", v101106, "SELECT 1 --1", false},
		{"dash dash space", "SELECT 1 -- 1\n+2", v101106, "SELECT 1 +2", false},
		{"dash dash control", "SELECT 1 --\x01+1", v101106, "SELECT 1", false},
		{"dash dash at end", "SELECT 1 --", v101106, "SELECT 1", false},
		{"hash", "SELECT 1 # x\n+1", v101106, "SELECT 1 +1", false},
		{"comment in a string", "SELECT '/*', 1", v101106, "SELECT '/*', 1", false},
		{"escaped quote", `SELECT 'a\' /* ', 1 /* x */`, v101106, `SELECT 'a\' /* ', 1`, false},
		{"no backslash escapes", `SELECT 'a\' /* ', 1 /* x */`, nbe, `SELECT 'a\'`, false},
		{"double quotes string", `SELECT "a -- ", 1`, v101106, `SELECT "a -- ", 1`, false},
		{"ansi quotes identifier", `SELECT "a\" -- ", 1`, ansi, `SELECT "a\"`, false},
		{"hex literal", `SELECT x'41' /* c */`, v101106, `SELECT x'41'`, false},
		{"marker blanked, text kept", "/*M!100000 UPDATE t SET a = 0 */", v101106, "UPDATE t SET a = 0", false},

		{"unterminated comment", "SELECT 1 /* x", v101106, "SELECT 1", true},
		{"unterminated run comment", "SELECT 1 /*! +1", v101106, "SELECT 1 +1", true},
		{"unterminated skipped comment", "SELECT 1 /*!999999 +1", v101106, "SELECT 1", true},
		{"run comment inside a run one", "SELECT 1 /*! +1 /*! +2 */ +4 */", v101106, "SELECT 1 +1 +2 +4 */", true},
		{"statement end in a run comment", "SELECT 1 /*! ; SELECT 2 */", v101106, "SELECT 1 ; SELECT 2", true},
		{"version unknown", "SELECT 1 /*!100000 +1 */", Options{}, "SELECT 1 +1", true},
		{"no version, version unknown", "SELECT 1 /*! +1 */", Options{}, "SELECT 1 +1", false},
		{"comment right after dashes", "SELECT 2 --/* x */1", v101106, "SELECT 2 -- 1", true},
		{"marker right after dashes", "SELECT 2 --/*!1 */", v101106, "SELECT 2 -- 1", true},
		{"hash right after dashes", "SELECT 2 --#\n1", v101106, "SELECT 2 -- 1", true},
		{"NUL in a line comment", "SELECT 1 -- x\x00\n", v101106, "SELECT 1", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := expand(c.sql, c.o)
			if len(got) != len(c.sql) {
				t.Fatalf("expand(%q) changed the length: %q", c.sql, got)
			}
			if squeeze(got) != c.want {
				t.Errorf("expand(%q) = %q, want %q", c.sql, squeeze(got), c.want)
			}
			if (why != "") != c.uncertain {
				t.Errorf("expand(%q) uncertain = %q, want uncertain %v", c.sql, why, c.uncertain)
			}
		})
	}
}

// keysOf returns the sku_id keys the first statement pins on its first
// table, as text; ok false when it pins none (any row).
func keysOf(t *testing.T, a *Analysis) ([]string, bool) {
	t.Helper()
	if a.Unparsed || len(a.Stmts) == 0 || len(a.Stmts[0].Tables) == 0 {
		t.Fatalf("no statement or table in %+v", a)
	}
	tuples, ok := a.Stmts[0].Tables[0].Where.Keys([]string{"sku_id"})
	var keys []string
	for _, tu := range tuples {
		keys = append(keys, tu[0].Text)
	}
	return keys, ok
}

// TestAnalyzeWithServerReading covers the texts whose keys were read from
// text MariaDB does not run, or missed text it runs.
func TestAnalyzeWithServerReading(t *testing.T) {
	cases := []struct {
		name, sql string
		o         Options
		kind      Kind
		keys      []string // nil: no key pinned, any row
	}{
		{"M comment holds the whole UPDATE", "/*M!100000 UPDATE sku_stock SET stock = 0 */", v101106, KindUpdate, nil},
		{"M comment widens the WHERE", "UPDATE sku_stock SET stock = 7 WHERE sku_id = 1001 /*M! OR 1=1 */", v101106, KindUpdate, nil},
		{"M comment opens the statement", "/*M! UPDATE sku_stock SET stock = 42 WHERE sku_id IN */ (SELECT sku_id FROM sku_stock)", v101106, KindUpdate, nil},
		{"M comment opens a keyed statement", "/*M! UPDATE sku_stock SET stock = 42 WHERE sku_id IN */ (SELECT 1001)", v101106, KindUpdate, []string{"1001"}},
		{"skipped version narrows nothing", "UPDATE sku_stock SET stock = 7 WHERE sku_id = 1001 /*!999999 OR 1=1 */", v101106, KindUpdate, []string{"1001"}},
		{"T comment is not run", "DELETE FROM sku_stock WHERE sku_id = 1 /*T! AND sku_id = 2 */", v101106, KindDelete, []string{"1"}},
		{"double quotes are a string", `UPDATE sku_stock SET stock = 7 WHERE sku_id = "sku_id"`, v101106, KindUpdate, []string{"'sku_id'"}},
		{"ANSI_QUOTES: double quotes name the column", `UPDATE sku_stock SET stock = 7 WHERE sku_id = "sku_id"`,
			Options{Mode: ModeANSIQuotes, ServerVersion: 101106}, KindUpdate, nil},
		{"ANSI implies ANSI_QUOTES", `UPDATE sku_stock SET stock = 7 WHERE sku_id = "sku_id"`,
			Options{Mode: ParseSQLMode("ANSI"), ServerVersion: 101106}, KindUpdate, nil},
		{"backslash escapes the quote", `UPDATE sku_stock SET stock = 7 WHERE sku_id = 'x\' OR 1=1 -- '`, v101106, KindUpdate, []string{`'x'' OR 1=1 -- '`}},
		{"NO_BACKSLASH_ESCAPES: the string ends at the backslash", `UPDATE sku_stock SET stock = 7 WHERE sku_id = 'x\' OR 1=1 -- '`,
			Options{Mode: ModeNoBackslashEscapes, ServerVersion: 101106}, KindUpdate, nil},
		{"PIPES_AS_CONCAT: || is not OR", `UPDATE sku_stock SET stock = 7 WHERE sku_id = 1 || 2`,
			Options{Mode: ModePipesAsConcat, ServerVersion: 101106}, KindUpdate, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := AnalyzeWith(c.sql, "shop", c.o)
			if err != nil {
				t.Fatal(err)
			}
			if a.Unparsed || len(a.Stmts) != 1 || a.Stmts[0].Kind != c.kind {
				t.Fatalf("got unparsed=%v (%s) %d statements, want one %s", a.Unparsed, a.ParseError, len(a.Stmts), c.kind)
			}
			if a.Uncertain != "" {
				t.Errorf("uncertain: %s", a.Uncertain)
			}
			keys, ok := keysOf(t, a)
			if c.keys == nil {
				if ok {
					t.Errorf("keys %v, want none (every row)", keys)
				}
				return
			}
			if !ok || strings.Join(keys, ",") != strings.Join(c.keys, ",") {
				t.Errorf("keys %v (%v), want %v", keys, ok, c.keys)
			}
		})
	}
}

func TestAnalyzeWithUncertain(t *testing.T) {
	cases := []struct {
		name, sql string
		o         Options
		uncertain bool
	}{
		{"plain", "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1", v101106, false},
		{"unterminated comment", "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1 /* x", v101106, true},
		{"version comment, version unknown", "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1 /*!100000 OR 1=1 */", Options{}, true},
		{"ORACLE", "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1", Options{Mode: ParseSQLMode("ORACLE"), ServerVersion: 101106}, true},
		{"MSSQL", "UPDATE sku_stock SET stock = 1 WHERE sku_id = 1", Options{Mode: ParseSQLMode("MSSQL"), ServerVersion: 101106}, true},
		{"SET sql_mode then more", "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'); UPDATE sku_stock SET stock = 7 WHERE sku_id = \"sku_id\"", v101106, true},
		{"SET SESSION sql_mode then more", "SET @@session.sql_mode = 'ANSI'; SELECT 1", v101106, true},
		{"SET sql_mode last", "SELECT 1; SET sql_mode = 'ANSI'", v101106, false},
		{"SET GLOBAL sql_mode then more", "SET GLOBAL sql_mode = 'ANSI'; SELECT 1", v101106, false},
		// MariaDB restores the caller's sql_mode when a routine returns.
		{"CALL then more", "CALL p(); UPDATE sku_stock SET stock = 1 WHERE sku_id = 1", v101106, false},
		{"EXECUTE then more", "EXECUTE s; UPDATE sku_stock SET stock = 1 WHERE sku_id = 1", v101106, true},
		{"SET STATEMENT sql_mode", "SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR UPDATE sku_stock SET stock = 7 WHERE sku_id = \"sku_id\"", v101106, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := AnalyzeWith(c.sql, "shop", c.o)
			if err != nil {
				t.Fatal(err)
			}
			if (a.Uncertain != "") != c.uncertain {
				t.Errorf("Uncertain = %q, want uncertain %v", a.Uncertain, c.uncertain)
			}
		})
	}
}

func TestAnalyzeWithKeepsHintAndParams(t *testing.T) {
	a, err := AnalyzeWith("/* lockproxy:primary */ SELECT ? /* ? */, 1 -- ?\n /*! , ? */", "shop", v101106)
	if err != nil {
		t.Fatal(err)
	}
	if !a.PrimaryHint || len(a.Stmts) != 1 || !a.Stmts[0].PrimaryHint {
		t.Errorf("hint lost: %+v", a)
	}
	if a.Params != 2 || a.Stmts[0].Params != 2 {
		t.Errorf("params %d (statement %d), want 2: the ? of comments the server skips do not count", a.Params, a.Stmts[0].Params)
	}
	if got := squeeze(a.Stmts[0].Text); got != "SELECT ? , 1 , ?" {
		t.Errorf("Text %q", got)
	}
}

func TestMayChangeMode(t *testing.T) {
	cases := map[string]bool{
		"SET sql_mode = 'ANSI'":                        true,
		"SET SESSION sql_mode = 'ANSI'":                true,
		"SET @@sql_mode = 'ANSI', autocommit = 1":      true,
		"SET GLOBAL sql_mode = 'ANSI'":                 false,
		"SET autocommit = 1":                           false,
		"EXECUTE s":                                    true,
		"EXECUTE IMMEDIATE 'SET sql_mode = 1'":         true,
		"SET STATEMENT sql_mode = 'ANSI' FOR SELECT 1": true,
		"CALL p()":                     false,
		"SELECT 1; UPDATE t SET a = 1": false,
		"SELECT 1; SET sql_mode = ''":  true,
		"this is not SQL":              false,
	}
	for sql, want := range cases {
		a, err := AnalyzeWith(sql, "shop", v101106)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.MayChangeMode(); got != want {
			t.Errorf("MayChangeMode(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestParseSQLMode(t *testing.T) {
	cases := []struct {
		in   string
		want Mode
	}{
		{"", 0},
		{"STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION", 0},
		{"ansi_quotes", ModeANSIQuotes},
		{" NO_BACKSLASH_ESCAPES , IGNORE_SPACE", ModeNoBackslashEscapes | ModeIgnoreSpace},
		{"ANSI", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace},
		{"REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace},
		{"DB2", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace},
		{"POSTGRESQL", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace},
		{"MAXDB", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace},
		{"MSSQL", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace | ModeMSSQL},
		{"ORACLE", ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace | ModeOracle},
		{"MYSQL40", ModeHighNotPrecedence},
		{"MYSQL323", ModeHighNotPrecedence},
		{"TRADITIONAL", 0},
		{"HIGH_NOT_PRECEDENCE", ModeHighNotPrecedence},
		{"SOMETHING_NEW", ModeUnknown},
	}
	for _, c := range cases {
		if got := ParseSQLMode(c.in); got != c.want {
			t.Errorf("ParseSQLMode(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestServerVersionOf(t *testing.T) {
	cases := map[string]int{
		"10.11.6-MariaDB-log":                   101106,
		"5.5.5-10.11.14-MariaDB-0+deb12u2":      101114,
		"11.4.2-MariaDB":                        110402,
		"8.0.36":                                80036,
		"":                                      0,
		"10.11":                                 0,
		"MariaDB":                               0,
		"10.1234.1":                             0,
		"5.5.5-10.6.16-MariaDB-1:10.6.16+maria": 100616,
	}
	for in, want := range cases {
		if got := ServerVersionOf(in); got != want {
			t.Errorf("ServerVersionOf(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestCacheKeyedByOptions(t *testing.T) {
	c := NewCache(16)
	sql := `UPDATE sku_stock SET stock = 7 WHERE sku_id = "sku_id"`
	plain, err := c.AnalyzeWith(sql, "shop", v101106)
	if err != nil {
		t.Fatal(err)
	}
	ansi, err := c.AnalyzeWith(sql, "shop", Options{Mode: ModeANSIQuotes, ServerVersion: 101106})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keysOf(t, plain); !ok {
		t.Error("default mode: the string should pin a key")
	}
	if _, ok := keysOf(t, ansi); ok {
		t.Error("ANSI_QUOTES: the cache returned the default mode's analysis")
	}
	if c.Len() != 2 {
		t.Errorf("cache holds %d analyses, want 2", c.Len())
	}
}

// TestRewriteUnderMode: a rewrite of a statement read under
// NO_BACKSLASH_ESCAPES writes a backslash once, as that session reads it.
func TestRewriteUnderMode(t *testing.T) {
	sql := "UPDATE sku_stock SET stock = ? WHERE sku_id = ?"
	for _, c := range []struct {
		mode Mode
		want string
	}{
		{0, "UPDATE `sku_stock` SET `stock`=`stock` - 3 WHERE (`sku_id` = 'a\\\\b') AND `stock` - 3 >= 0"},
		{ModeNoBackslashEscapes, "UPDATE `sku_stock` SET `stock`=`stock` - 3 WHERE (`sku_id` = 'a\\b') AND `stock` - 3 >= 0"},
		{ModeANSIQuotes, "UPDATE `sku_stock` SET `stock`=`stock` - 3 WHERE (`sku_id` = 'a\\\\b') AND `stock` - 3 >= 0"},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			a, err := AnalyzeWith(sql, "shop", Options{Mode: c.mode, ServerVersion: 101106})
			if err != nil {
				t.Fatal(err)
			}
			spec := RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", Old: []byte("10")}
			got, ok, reason, err := RewriteUpdate(a.Stmts[0], spec, []any{int64(7), `a\b`})
			if err != nil || !ok {
				t.Fatalf("RewriteUpdate: ok=%v reason=%q err=%v", ok, reason, err)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			upd, _, ok, reason, err := FenceUpdate(a.Stmts[0], "fence", 9, []any{int64(7), `a\b`})
			if err != nil || !ok {
				t.Fatalf("FenceUpdate: ok=%v reason=%q err=%v", ok, reason, err)
			}
			if wantLit := c.want[strings.Index(c.want, "'") : strings.LastIndex(c.want, "'")+1]; !strings.Contains(upd, wantLit) {
				t.Errorf("fenced update %s does not hold %s", upd, wantLit)
			}
		})
	}
}

// FuzzExpand: the expansion keeps every offset and every newline, and,
// when certain, reads the same again (nothing it left is a comment).
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"SELECT 1 /*M! +1 */", "a /*!999999 /* b */ c */ d", "x -- y\nz # w", `'a\' /* ' */`, "/*! a /*! b */ c */", "`/*` /*!50700 x */"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(ModeNoBackslashEscapes|ModeANSIQuotes))
	}
	f.Fuzz(func(t *testing.T, sql string, mode uint8) {
		o := Options{Mode: Mode(mode) & (ModeANSIQuotes | ModeNoBackslashEscapes), ServerVersion: 101106}
		text, why := Expand(sql, o)
		if len(text) != len(sql) {
			t.Fatalf("length %d, want %d", len(text), len(sql))
		}
		for i := range sql {
			if (sql[i] == '\n') != (text[i] == '\n') {
				t.Fatalf("newline moved at %d", i)
			}
		}
		if why == "" {
			if again, _ := Expand(text, o); again != text {
				t.Fatalf("expanding %q again gives %q", text, again)
			}
		}
	})
}
