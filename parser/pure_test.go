package parser

import (
	"strings"
	"testing"
)

// TestImpure: a read calling anything but a vetted built-in, spelt as
// MariaDB resolves it to that built-in, or reading a system variable, says
// why; a read of pure built-ins says nothing.
func TestImpure(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want string // a substring of Facts.Impure; "" for pure
	}{
		{"SELECT id, v FROM t WHERE id = 1", ""},
		{"SELECT CONCAT(a, 'x'), NOW(), COUNT(*), SUM(v), IFNULL(a, 0) FROM t GROUP BY a", ""},
		{"SELECT DATE_ADD(NOW(), INTERVAL 1 DAY), CAST(v AS CHAR), CONVERT(a USING utf8mb4)", ""},
		{"SELECT SUBSTRING(a FROM 2), TRIM(LEADING 'x' FROM a), EXTRACT(DAY FROM d) FROM t", ""},
		{"SELECT CURRENT_TIMESTAMP, ROW_NUMBER() OVER (ORDER BY id) FROM t", ""},
		{"SELECT concat (a, b) FROM t", "concat"}, // coarser than MariaDB: safe
		{"SELECT f(1)", "calls shop.f()"},
		{"SELECT other.f(1)", "calls other.f()"},
		{"SELECT id FROM t WHERE v > f(id)", "calls shop.f()"},
		{"SELECT (SELECT f(1)) AS x", "calls shop.f()"},
		{"SELECT NEXTVAL(s)", "nextval"},
		{"SELECT NEXT VALUE FOR s", "nextval"},
		{"SELECT LASTVAL(s)", "lastval"},
		{"SELECT SETVAL(s, 10)", "setval"},
		{"SELECT GET_LOCK('a', 1)", "get_lock"},
		{"SELECT LOAD_FILE('/etc/passwd')", "load_file"},
		{"SELECT CONNECTION_ID()", "connection_id"},
		{"SELECT @@server_id, @@time_zone, @@sql_mode", ""},
		{"SELECT @@GLOBAL.time_zone", "@@time_zone"},
		{"SELECT @@SESSION.warning_count", "@@warning_count"},
		{"SELECT @@tx_isolation", "@@tx_isolation"},
		{"SELECT @@read_only", "@@read_only"},
		{"SELECT @@gtid_current_pos", "@@gtid_current_pos"},
		{"SELECT NOW ()", "now"},
		{"SELECT NOW/* x */()", "now"},
		{"SELECT `now`()", "now"},
		{"SELECT COUNT (*) FROM t", "count"},
		{"SELECT JSON_DETAILED('[1]')", "json_detailed"},
	} {
		a := mustAnalyze(t, tc.sql, "shop")
		if a.Unparsed {
			if tc.want == "" {
				t.Errorf("%s: not parsed", tc.sql)
			}
			continue // unparsed text runs on the primary
		}
		f := a.Stmts[0]
		switch {
		case tc.want == "" && f.Impure != "":
			t.Errorf("%s: Impure %q, want none", tc.sql, f.Impure)
		case tc.want != "" && !strings.Contains(f.Impure, tc.want):
			t.Errorf("%s: Impure %q, want it to name %q", tc.sql, f.Impure, tc.want)
		}
	}
}

// TestImpureANSIQuotes: under ANSI_QUOTES a double-quoted built-in name
// calls the stored function of that name ("now"() is not NOW()); a
// double-quoted string elsewhere is an identifier the check leaves alone.
func TestImpureANSIQuotes(t *testing.T) {
	for sql, want := range map[string]string{
		`SELECT "now"()`:                 "now",
		`SELECT NOW(), "id" FROM t`:      "",
		`SELECT "concat" (1, 2)`:         "concat",
		`SELECT CONCAT("a", 'b') FROM t`: "",
	} {
		a, err := AnalyzeWith(sql, "shop", Options{Mode: ModeANSIQuotes})
		if err != nil || a.Unparsed {
			t.Fatalf("%s: %v %s", sql, err, a.ParseError)
		}
		got := a.Stmts[0].Impure
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s under ANSI_QUOTES: Impure %q, want it to name %q", sql, got, want)
		}
	}
}

// TestSetComputed: a SET whose value the server computes is told from one
// that is the same on every server.
func TestSetComputed(t *testing.T) {
	for sql, want := range map[string]bool{
		"SET sql_mode = 'ANSI'":                              false,
		"SET NAMES utf8mb4":                                  false,
		"SET SESSION time_zone = '+00:00', @a = -1":          false,
		"SET autocommit = ON":                                false,
		"SET sort_buffer_size = DEFAULT":                     true, // the global value of the server that runs it
		"SET NAMES DEFAULT":                                  true,
		"SET character_set_client = utf8mb4":                 false,
		"SET @a = f()":                                       true,
		"SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI')": true,
		"SET time_zone = @tz":                                true,
		"SET @a = (SELECT COUNT(*) FROM t)":                  true,
		"SET SESSION wait_timeout = 10, @b = NOW()":          true,
	} {
		if got := one(t, sql).Effects.SetComputed; got != want {
			t.Errorf("%s: SetComputed %v, want %v", sql, got, want)
		}
	}
}
