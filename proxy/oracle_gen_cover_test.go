package proxy

import (
	"math/rand"
	"strings"
	"testing"
)

// TestOracleCorpusCovers checks that the fixed corpus is deterministic and
// holds every feature the oracle is meant to judge.
func TestOracleCorpusCovers(t *testing.T) {
	corpus := func() []oracleCase {
		rng := seededChoices{rand.New(rand.NewSource(oracleSeed))}
		out := make([]oracleCase, oracleCorpusSize)
		for i := range out {
			out[i] = genCase(rng)
		}
		return out
	}
	a, b := corpus(), corpus()
	var all strings.Builder
	for i := range a {
		if a[i].String() != b[i].String() {
			t.Fatalf("case %d differs between two runs of one seed: %s / %s", i, a[i], b[i])
		}
		all.WriteString(a[i].String() + "\n")
	}
	text := all.String()
	for _, want := range []string{
		`"UPDATE `, `"DELETE `, `"INSERT `, "ON DUPLICATE KEY UPDATE", `"REPLACE `, "UPDATE sku s, acct a", "DELETE s, a FROM",
		" IN (", " OR ", " AND ", "(shop_id, code) = (", " BETWEEN ", " LIKE ", "SELECT id + 1000", "NOT ",
		"/* c */", "-- c\\n", "#c\\n", "/*!*/", "/*!50700 ", "/*!100000 ", "/*!999999 ", "/*M! ", "/*M!100000 ", "/*M!999999 ",
		"/*T! ", "/**/", "--1",
		"sql_mode +ANSI_QUOTES]", "sql_mode +NO_BACKSLASH_ESCAPES]", "sql_mode +PIPES_AS_CONCAT]", "sql_mode +HIGH_NOT_PRECEDENCE]",
		"sql_mode +IGNORE_SPACE]", "sql_mode +ANSI]", "SET sql_mode = CONCAT(", "'ALICE'",
		"'1001'", "1001.0", "0x", "_utf8mb4'1001'|_utf8mb4'1002'|_utf8mb4'1003'|_utf8mb4'1004'|_utf8mb4'1005'|_utf8mb4'100'|_utf8mb4'200'|_utf8mb4'2001'", "e3", "_latin1 X'", "ı", "e-400'", "0000000000000000000000000000000000000001'",
		"TINY ", "SHORT ", "INT24 ", "LONG ", "LONGLONG ", "LONGLONG UNSIGNED", "FLOAT ", "DOUBLE ", "NEWDECIMAL ", "DATE ",
		"DATETIME ", "TIMESTAMP ", "TIME 00:10:01", "YEAR ", "VAR_STRING ", "BLOB ",
		"PREPARE oracle_p FROM", "EXECUTE oracle_p USING @oracle_k", "EXECUTE IMMEDIATE", "v_sku ", "v_sku_low", "CALL oracle_",
		"UPDATE free ",
		// typed keys
		"INTO ikey", "INTO ukey", "INTO dkey", "INTO dt ", "INTO dtc", "t_unicode", "t_uca", "t_ascs", "t_bin", "t_nopad", "t_swedish", "t_german",
		"[sql_mode +'']", "[after SET NAMES latin1]", "[after SET NAMES gbk]", "[after SET NAMES cp1250]", "[after SET NAMES utf8mb3]", "[after SET NAMES binary]", "[after SET NAMES ascii]", "e-400'", "b'", "TIMESTAMP'", "DATE'", "T12:00:00", "2000/10/01",
		"'20001001120000", " 20001001120000", "COLLATE utf8mb4_bin", "COLLATE latin1_", "_latin1 X'", "١٠٠١", "\u212Aelvin", "99999999999",
		"18446744073709551616", "1152921504606846976e0", "DATETIME 2000-10-01 12:00:00.500000", "DOUBLE 1.152921504606847e+18|DOUBLE 1e+20",
		"NEWDECIMAL ", ".0000000000000000000000000000000000000000001", "BLOB \"\\x03\\xe9\"", "LONGLONG UNSIGNED 18446744073709551615",
		"LONGLONG -1", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "VAR_STRING \"2000-10-0",
	} {
		found := false
		for _, alt := range strings.Split(want, "|") {
			found = found || strings.Contains(text, alt)
		}
		if !found {
			t.Errorf("the corpus never holds %q", want)
		}
	}
	spaced := false
	for _, k := range acctKeys {
		spaced = spaced || strings.Contains(text, "'"+k+"  '")
	}
	if !spaced {
		t.Errorf("the corpus never spells a string key with trailing spaces")
	}
}
