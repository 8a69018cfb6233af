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
		"sql_mode +IGNORE_SPACE]", "sql_mode +ANSI]", "SET sql_mode = CONCAT(", "'ALICE'", "'alice  '",
		"'1001'", "1001.0", "0x3E9", "_utf8mb4'1001'", "e3", "_latin1 X'", "ı", "e-400'", "0000000000000000000000000000000000000001'",
		"TINY ", "SHORT ", "INT24 ", "LONG ", "LONGLONG ", "LONGLONG UNSIGNED", "FLOAT ", "DOUBLE ", "NEWDECIMAL ", "DATE ",
		"DATETIME ", "TIMESTAMP ", "TIME 00:10:01", "YEAR ", "VAR_STRING ", "BLOB ",
		"PREPARE oracle_p FROM", "EXECUTE oracle_p USING @oracle_k", "EXECUTE IMMEDIATE", "v_sku ", "v_sku_low", "CALL oracle_",
		"UPDATE free ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the corpus never holds %q", want)
		}
	}
}
