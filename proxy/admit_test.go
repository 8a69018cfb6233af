package proxy

import (
	"strings"
	"testing"
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
			b := []byte(q)
			_, lit := scanText(b, 256, true)
			if strings.Contains(q, `\`) {
				lit = literalBytes(b, lit, 256, noBackslash)
			}
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
		if over, _ := scanText([]byte(q), 256, true); !over {
			t.Errorf("%.40q: nesting of 300 not seen", q)
		}
	}
}
