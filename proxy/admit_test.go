package proxy

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// TestScanTextLiterals: the bytes counted as literal (8 bytes of analysis
// a byte, not 256) are those inside quotes as MariaDB reads backslashes
// under the session's mode (either mode for a text naming sql_mode), so
// code cannot pass for a literal to be analysed within a budget it
// exceeds.
func TestScanTextLiterals(t *testing.T) {
	code := strings.Repeat("1+", 1000) + "1"
	for _, noBackslash := range []bool{false, true} {
		literal := func(q string) int {
			t.Helper()
			var o parser.ScanOptions
			if noBackslash {
				o.Mode = parser.ModeNoBackslashEscapes
			}
			_, lit := textCost([]byte(q), 256, o, false)
			return lit
		}
		escaped := 4000
		if noBackslash {
			escaped = 3000
		}
		for _, tc := range []struct {
			q        string
			min, max int
		}{
			{"INSERT INTO t (id, b) VALUES (1, '" + strings.Repeat(`ab\'c`, 1000) + "')", escaped, 5002},
			{"INSERT INTO t (id, b) VALUES (1, X'" + strings.Repeat("0f", 1000) + "')", 2002, 2002},
			{"SELECT " + code + " FROM t WHERE b = 'x'", 3, 3},
			// '\' ends under NO_BACKSLASH_ESCAPES, which the text may set.
			{`SET sql_mode = 'NO_BACKSLASH_ESCAPES'; SELECT '\', ` + code + `, '`, 0, 40},
			{`SET SQL_Mode = 'NO_BACKSLASH_ESCAPES'; SELECT '\', ` + code + `, '`, 0, 40},
			{"SELECT `a\\`, " + code + ", `x`", 0, 0},
		} {
			if n := literal(tc.q); n < tc.min || n > tc.max {
				t.Errorf("noBackslash %v: %.60q: %d literal bytes, want %d-%d", noBackslash, tc.q, n, tc.min, tc.max)
			}
		}
		if n := literal(`SELECT '\', ` + code + `, '`); noBackslash && n > 8 {
			t.Errorf("under NO_BACKSLASH_ESCAPES, code after '\\' counted as %d literal bytes", n)
		}
	}
}

// TestScanTextNestingInComments: text MariaDB (and lockproxy's parser,
// which reads the text MariaDB runs) reads as a comment cannot open a
// literal that hides the parentheses after it from the nesting check:
// "--" before a control byte starts a comment, and so does "/*M" without
// "!".
func TestScanTextNestingInComments(t *testing.T) {
	deep := strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300)
	for _, q := range []string{
		"SELECT 1 --\x01 '\nSELECT " + deep + " AS x -- '",
		"SELECT 1 --\r '\nSELECT " + deep + " AS x -- '",
		"SELECT 1 /*M ' */, " + deep + " /* ' */",
	} {
		if over, _ := textCost([]byte(q), 256, parser.ScanOptions{ServerVersion: 101100}, false); !over {
			t.Errorf("%.40q: nesting of 300 not seen", q)
		}
	}
}

// TestTextCostNestingAsParserReads: nesting is checked as lockproxy's
// parser reads the text, under the session's sql_mode and the server's
// version, and under every mode a text naming sql_mode or read under a
// mode not known for sure may get: a quote that one reading escapes or
// skips in a comment the server does not run cannot hide the parentheses
// after it.
func TestTextCostNestingAsParserReads(t *testing.T) {
	deep := strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300)
	noBackslash := parser.ScanOptions{Mode: parser.ModeNoBackslashEscapes, ServerVersion: 101100}
	ansi := parser.ScanOptions{Mode: parser.ModeANSIQuotes, ServerVersion: 101100}
	plain := parser.ScanOptions{ServerVersion: 101100}
	for _, tc := range []struct {
		q      string
		o      parser.ScanOptions
		unsure bool
	}{
		// '\' ends a string under NO_BACKSLASH_ESCAPES.
		{`SELECT '\', ` + deep + ` AS x, '\'`, noBackslash, false},
		{`SELECT '\', ` + deep + ` AS x, '\'`, plain, true},
		{`SET sql_mode = 'NO_BACKSLASH_ESCAPES'; SELECT '\', ` + deep + ` AS x, '\'`, plain, false},
		// "a\" is a name under ANSI_QUOTES, where a backslash escapes nothing.
		{`SELECT "a\", ` + deep + ` AS x, "\"`, ansi, false},
		{`SELECT "a\", ` + deep + ` AS x, "\"`, plain, true},
		// A version comment the server does not run ends at its first */.
		{"SELECT 1 /*!999999 ' */, " + deep + " /* ' */", plain, false},
		// In latin1 "--" and a no-break space start a comment.
		{"SELECT 1 --\xa0'\n, " + deep + " -- '", parser.ScanOptions{Charset: "latin1", ServerVersion: 101100}, false},
	} {
		if over, _ := textCost([]byte(tc.q), 256, tc.o, tc.unsure); !over {
			t.Errorf("%.50q under %+v (unsure %v): nesting of 300 not seen", tc.q, tc.o, tc.unsure)
		}
	}
}
