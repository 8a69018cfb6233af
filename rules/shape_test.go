package rules

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/sqlcorpus"
	"github.com/lockproxy/lockproxy/parser"
)

// TestShapedTextsKeyAsTheirText: for every statement of the parser's
// corpus that lockproxy analyses by its shape (parser.Cache.AnalyzeShaped),
// and for other texts of the same shape, the decision made from the
// shape's analysis bound to the text's literals takes the keys the text's
// own analysis takes, routes it the same way and refuses what it refuses,
// whenever it keys every row (the proxy makes any other plan again from the
// text itself).
func TestShapedTextsKeyAsTheirText(t *testing.T) {
	rs := matchSet(t, Schema{})
	placeholder := regexp.MustCompile(`\?`)
	shaped, compared := 0, 0
	for i, c := range readParserCorpus(t) {
		cache := parser.NewCache(8)
		for round := range 3 {
			sql := c.SQL
			if round > 0 {
				// Another text of the shape: other numbers where it has '?'.
				an, params, err := cache.AnalyzeShaped(c.SQL, c.DB, parser.DefaultOptions)
				if err != nil || params == nil {
					break
				}
				parts := placeholder.Split(an.SQL, -1)
				sql = parts[0]
				for j, p := range parts[1:] {
					sql += strconv.Itoa((i*7+j*13+round*1001)%5000) + p
				}
			}
			an, params, err := cache.AnalyzeShaped(sql, c.DB, parser.DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			if params == nil {
				continue
			}
			if round == 0 {
				shaped++
			}
			lit, err := parser.Analyze(sql, c.DB)
			if err != nil {
				t.Fatal(err)
			}
			for _, inTxn := range []bool{false, true} {
				want := rs.Match(lit.Stmts[0], c.DB, inTxn)
				got := rs.Match(an.Stmts[0], c.DB, inTxn)
				if got.NeedParams {
					got = got.Bind(params)
				}
				if got.Reject || len(got.Unkeyed) > 0 || len(got.UnkeyedReads) > 0 || len(got.Hidden) > 0 {
					continue // planned again from the text
				}
				compared++
				if keyNames(got) != keyNames(want) || got.Reject != want.Reject || len(want.Unkeyed) > 0 ||
					got.RoutePrimary != want.RoutePrimary || ruleNames(got) != ruleNames(want) || got.Class != want.Class {
					t.Errorf("%s (in transaction %v):\nfrom its shape: keys %s reject %v unkeyed %v primary %v rules %s\nfrom its text:  keys %s reject %v unkeyed %v primary %v rules %s",
						sql, inTxn, keyNames(got), got.Reject, got.Unkeyed, got.RoutePrimary, ruleNames(got),
						keyNames(want), want.Reject, want.Unkeyed, want.RoutePrimary, ruleNames(want))
				}
			}
		}
	}
	if shaped < 40 || compared < 100 {
		t.Fatalf("only %d corpus statements were shaped and %d decisions compared: the test no longer tests much", shaped, compared)
	}
}

func ruleNames(d Decision) string {
	var out []string
	for _, r := range d.Rules {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// readParserCorpus reads the parser's statement corpus.
func readParserCorpus(t *testing.T) []sqlcorpus.Case {
	t.Helper()
	cases, err := sqlcorpus.Read(filepath.Join("..", "parser", "testdata", "corpus.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}
