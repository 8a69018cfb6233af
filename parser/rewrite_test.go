package parser

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// rewriteOne analyses sql under database shop and rewrites its stmt-th
// statement.
func rewriteOne(t testing.TB, sql string, stmt int, spec RewriteSpec, params []any) (string, bool, string, error) {
	t.Helper()
	a, err := Analyze(sql, "shop")
	if err != nil || a.Unparsed {
		t.Fatalf("Analyze(%q): err=%v unparsed=%v %s", sql, err, a != nil && a.Unparsed, a.ParseError)
	}
	return RewriteUpdate(a.Stmts[stmt], spec, params)
}

func delta(old, min string) RewriteSpec {
	s := RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: min}
	if old != "" {
		s.Old = []byte(old)
	}
	return s
}

func cas(old string) RewriteSpec {
	return RewriteSpec{Column: "stock", Mode: RewriteCAS, Min: "0", Old: []byte(old)}
}

func TestRewriteUpdate(t *testing.T) {
	const big40 = "1234567890123456789012345678901234567890"
	tests := []struct {
		name   string
		sql    string
		stmt   int
		spec   RewriteSpec
		params []any
		want   string // "" when no rewrite applies
		reason string
	}{
		{name: "delta literal negative", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: delta("7", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 2 WHERE (`sku_id` = 1) AND `stock` - 2 >= 0"},
		{name: "delta literal positive", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: delta("3", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 2 WHERE (`sku_id` = 1) AND `stock` + 2 >= 0"},
		{name: "delta zero", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: delta("5", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 0 WHERE (`sku_id` = 1) AND `stock` + 0 >= 0"},
		{name: "delta without min adds no guard", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: delta("7", ""),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 2 WHERE `sku_id` = 1"},
		{name: "delta decimals", sql: "UPDATE sku_stock SET stock = 19.25 WHERE sku_id = 1", spec: delta("17.50", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 1.75 WHERE (`sku_id` = 1) AND `stock` + 1.75 >= 0"},
		{name: "delta params", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", spec: delta("17.50", "0"),
			params: []any{[]byte("19.25"), int64(1001)},
			want:   "UPDATE `sku_stock` SET `stock`=`stock` + 1.75 WHERE (`sku_id` = 1001) AND `stock` + 1.75 >= 0"},
		{name: "delta int and float params", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", spec: delta("1", "-0.5"),
			params: []any{0.1, int32(-2)},
			want:   "UPDATE `sku_stock` SET `stock`=`stock` - 0.9 WHERE (`sku_id` = (-2)) AND `stock` - 0.9 >= -0.5"},
		{name: "delta uint param and exponent old", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: delta("1e19", "1e1"),
			params: []any{uint64(math.MaxUint64)},
			want:   "UPDATE `sku_stock` SET `stock`=`stock` + 8446744073709551615 WHERE (`sku_id` = 1) AND `stock` + 8446744073709551615 >= 10"},
		{name: "delta 40-digit decimals", sql: "UPDATE sku_stock SET stock = " + big40 + ".5 WHERE sku_id = 1",
			spec: delta(big40, "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 0.5 WHERE (`sku_id` = 1) AND `stock` + 0.5 >= 0"},
		{name: "delta 40-digit result", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1",
			spec: delta("-0.0000000001", "0"), params: []any{big40},
			want: "UPDATE `sku_stock` SET `stock`=`stock` + " + big40 + ".0000000001 WHERE (`sku_id` = 1) AND `stock` + " + big40 + ".0000000001 >= 0"},
		{name: "delta string literal", sql: "UPDATE sku_stock SET stock = '4' WHERE sku_id = 1", spec: delta("7", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 3 WHERE (`sku_id` = 1) AND `stock` - 3 >= 0"},
		{name: "cas literal", sql: "UPDATE sku_stock SET stock = 9 WHERE sku_id = 1", spec: cas("10"),
			want: "UPDATE `sku_stock` SET `stock`=9 WHERE (`sku_id` = 1) AND `stock` = 10"},
		{name: "cas param", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", spec: cas("17.50"),
			params: []any{int64(19), "1001"},
			want:   "UPDATE `sku_stock` SET `stock`=19 WHERE (`sku_id` = '1001') AND `stock` = 17.5"},
		{name: "cas without where", sql: "UPDATE sku_stock SET stock = 9", spec: cas("-3"),
			want: "UPDATE `sku_stock` SET `stock`=9 WHERE `stock` = -3"},
		{name: "relative param", sql: "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = ?", spec: delta("", "0"),
			params: []any{int64(1), int64(1001)},
			want:   "UPDATE `sku_stock` SET `stock`=`stock` - 1 WHERE (`sku_id` = 1001) AND `stock` - 1 >= 0"},
		{name: "relative literal in cas mode", sql: "UPDATE sku_stock SET stock = stock + 5 WHERE sku_id = 1",
			spec: RewriteSpec{Column: "stock", Mode: RewriteCAS, Min: "0"},
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 5 WHERE (`sku_id` = 1) AND `stock` + 5 >= 0"},
		{name: "relative delta first", sql: "UPDATE sku_stock SET stock = -1 + stock WHERE sku_id = 1", spec: delta("", "0"),
			want: "UPDATE `sku_stock` SET `stock`=-1 + `stock` WHERE (`sku_id` = 1) AND -1 + `stock` >= 0"},
		{name: "relative negative param", sql: "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = 1", spec: delta("", "0"),
			params: []any{int64(-3)},
			want:   "UPDATE `sku_stock` SET `stock`=`stock` - (-3) WHERE (`sku_id` = 1) AND `stock` - (-3) >= 0"},
		{name: "relative without where", sql: "UPDATE sku_stock SET stock = stock - 1", spec: delta("", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 1 WHERE `stock` - 1 >= 0"},
		{name: "relative keeps a remembered value unused", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1",
			spec: delta("7", "0"),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 1 WHERE (`sku_id` = 1) AND `stock` - 1 >= 0"},
		{name: "qualified column", sql: "UPDATE shop.sku_stock AS s SET s.stock = 4 WHERE s.sku_id = 1", spec: delta("5", "0"),
			want: "UPDATE `shop`.`sku_stock` AS `s` SET `s`.`stock`=`s`.`stock` - 1 WHERE (`s`.`sku_id` = 1) AND `s`.`stock` - 1 >= 0"},
		{name: "schema-qualified column", sql: "UPDATE shop.sku_stock SET shop.sku_stock.stock = shop.sku_stock.stock - 2 WHERE sku_id = 1",
			spec: delta("", "0"),
			want: "UPDATE `shop`.`sku_stock` SET `shop`.`sku_stock`.`stock`=`shop`.`sku_stock`.`stock` - 2 WHERE (`sku_id` = 1) AND `shop`.`sku_stock`.`stock` - 2 >= 0"},
		{name: "backticked names", sql: "UPDATE `sku stock` SET `St``ock` = 3 WHERE `id` = 1",
			spec: RewriteSpec{Column: "st`ock", Mode: RewriteDelta, Min: "0", Old: []byte("4")},
			want: "UPDATE `sku stock` SET `St``ock`=`St``ock` - 1 WHERE (`id` = 1) AND `St``ock` - 1 >= 0"},
		{name: "extra assignments", sql: "UPDATE sku_stock SET name = ?, stock = ?, updated = NOW(), n = n + ? WHERE sku_id = ?",
			spec: delta("10", "0"), params: []any{"it's", int64(8), int64(1), int64(7)},
			want: "UPDATE `sku_stock` SET `name`='it''s', `stock`=`stock` - 2, `updated`=NOW(), `n`=`n` + 1 WHERE (`sku_id` = 7) AND `stock` - 2 >= 0"},
		{name: "where with or", sql: "UPDATE t SET stock = stock - 1 WHERE a = 1 OR b = 2", spec: delta("", "0"),
			want: "UPDATE `t` SET `stock`=`stock` - 1 WHERE (`a` = 1 OR `b` = 2) AND `stock` - 1 >= 0"},
		{name: "where with and", sql: "UPDATE t SET stock = 3 WHERE a = 1 AND (b = 2 OR c = 3)", spec: cas("4"),
			want: "UPDATE `t` SET `stock`=3 WHERE (`a` = 1 AND (`b` = 2 OR `c` = 3)) AND `stock` = 4"},
		{name: "where already parenthesised", sql: "UPDATE t SET stock = 3 WHERE (a = 1 OR b = 2)", spec: cas("4"),
			want: "UPDATE `t` SET `stock`=3 WHERE (`a` = 1 OR `b` = 2) AND `stock` = 4"},
		{name: "where xor", sql: "UPDATE t SET stock = 3 WHERE a = 1 XOR b = 2", spec: cas("4"),
			want: "UPDATE `t` SET `stock`=3 WHERE (`a` = 1 XOR `b` = 2) AND `stock` = 4"},
		{name: "order by and limit", sql: "UPDATE t SET stock = stock - 1 WHERE a = ? ORDER BY id DESC LIMIT ?", spec: delta("", "0"),
			params: []any{int64(1), []byte("3")},
			want:   "UPDATE `t` SET `stock`=`stock` - 1 WHERE (`a` = 1) AND `stock` - 1 >= 0 ORDER BY `id` DESC LIMIT 3"},
		{name: "placeholders in CTE and subquery", sql: "WITH c AS (SELECT ? AS id) UPDATE t SET stock = stock - ? WHERE id IN (SELECT id FROM c WHERE x = ?)",
			spec: delta("", "0"), params: []any{int64(5), int64(1), "x'y"},
			want: "WITH `c` AS (SELECT 5 AS `id`) UPDATE `t` SET `stock`=`stock` - 1 WHERE (`id` IN (SELECT `id` FROM `c` WHERE `x` = 'x''y')) AND `stock` - 1 >= 0"},
		// MariaDB 10.11 reads /*+ ... */ as a plain comment: it is
		// dropped with the others.
		{name: "modifiers, hints and comments", sql: "/* lockproxy:primary */ UPDATE /*+ MAX_EXECUTION_TIME(1000) */ LOW_PRIORITY IGNORE t USE INDEX (PRIMARY) SET stock = ? WHERE id = ? -- c",
			spec: cas("2"), params: []any{int64(1), int64(7)},
			want: "UPDATE LOW_PRIORITY IGNORE `t` USE INDEX (`PRIMARY`) SET `stock`=1 WHERE (`id` = 7) AND `stock` = 2"},
		{name: "second statement of a text", sql: "UPDATE t SET x = ? WHERE id = ?; UPDATE sku_stock SET stock = ? WHERE sku_id = ?",
			stmt: 1, spec: delta("5", "0"), params: []any{"no", "no", int64(6), int64(9)},
			want: "UPDATE `sku_stock` SET `stock`=`stock` + 1 WHERE (`sku_id` = 9) AND `stock` + 1 >= 0"},
		{name: "several rows not checked without key", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id IN (1, 2)", spec: delta("7", ""),
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 2 WHERE `sku_id` IN (1,2)"},
		{name: "one row by key", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = ? AND (x = 1 OR sku_id = ?)",
			spec:   RewriteSpec{Column: "stock", Mode: RewriteCAS, Old: []byte("7"), Key: []string{"SKU_ID"}},
			params: []any{int64(4), int64(4)},
			want:   "UPDATE `sku_stock` SET `stock`=5 WHERE (`sku_id` = 4 AND (`x` = 1 OR `sku_id` = 4)) AND `stock` = 7"},

		{name: "unsafe client charset", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1",
			spec: RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", ClientCharset: "GBK"}, reason: ReasonUnsafeCharset},
		{name: "safe client charset", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1",
			spec: RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", ClientCharset: "latin1"},
			want: "UPDATE `sku_stock` SET `stock`=`stock` - 1 WHERE (`sku_id` = 1) AND `stock` - 1 >= 0"},
		{name: "no backslash escapes", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1",
			spec: RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", NoBackslashEscapes: true}, reason: ReasonNoBackslashEscapes},
		{name: "not an update", sql: "DELETE FROM sku_stock WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonNotUpdate},
		{name: "multi-table join", sql: "UPDATE sku_stock s JOIN o ON o.id = s.id SET s.stock = 1 WHERE s.sku_id = 1",
			spec: delta("1", "0"), reason: ReasonMultiTable},
		{name: "multi-table list", sql: "UPDATE sku_stock s, o SET s.stock = 1 WHERE s.sku_id = o.id", spec: delta("1", "0"), reason: ReasonMultiTable},
		{name: "no assignment", sql: "UPDATE sku_stock SET name = 'x' WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonNoAssignment},
		{name: "several assignments", sql: "UPDATE sku_stock SET stock = 1, stock = 2 WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonSeveralAssignments},
		{name: "expression", sql: "UPDATE sku_stock SET stock = stock * 2 WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonExpression},
		{name: "negated placeholder", sql: "UPDATE sku_stock SET stock = -? WHERE sku_id = 1", spec: delta("1", "0"), params: []any{int64(1)}, reason: ReasonExpression},
		{name: "nothing remembered", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: delta("", "0"), reason: ReasonNothingRemembered},
		{name: "relative without min", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1", spec: delta("", ""), reason: ReasonRelativeNoMin},
		{name: "relative non-numeric", sql: "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = 1", spec: delta("", "0"),
			params: []any{"1; DROP TABLE x"}, reason: ReasonNonNumeric},
		{name: "non-numeric literal", sql: "UPDATE sku_stock SET stock = 'abc' WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonNonNumeric},
		{name: "padded numeric string", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: delta("1", "0"), params: []any{" 5"}, reason: ReasonNonNumeric},
		{name: "null value", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: cas("1"), params: []any{nil}, reason: ReasonNonNumeric},
		{name: "hex string literal", sql: "UPDATE sku_stock SET stock = x'7a' WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonNonNumeric},
		{name: "hex number literal", sql: "UPDATE sku_stock SET stock = 0x31 WHERE sku_id = 1", spec: delta("1", "0"), reason: ReasonNonNumeric},
		{name: "hex number in WHERE", sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 0x10", spec: delta("", "0"), reason: ReasonHexNumber},
		{name: "non-numeric old", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", spec: cas("NaN"), reason: ReasonNonNumeric},
		{name: "nan param", sql: "UPDATE sku_stock SET stock = stock - 1, f = ? WHERE sku_id = 1", spec: delta("", "0"),
			params: []any{math.NaN()}, reason: ReasonNonFinite},
		{name: "too many digits", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: delta("0", "0"),
			params: []any{strings.Repeat("9", 66)}, reason: ReasonOutOfRange},
		{name: "too many fraction digits", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: delta("0", "0"),
			params: []any{"0." + strings.Repeat("1", 31)}, reason: ReasonOutOfRange},
		{name: "huge exponent", sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = 1", spec: delta("0", "0"),
			params: []any{"1e99999"}, reason: ReasonNonNumeric},
		{name: "order by placeholder", sql: "UPDATE t SET stock = stock - 1 ORDER BY ? LIMIT 1", spec: delta("", "0"),
			params: []any{int64(1)}, reason: ReasonParamPosition},
		{name: "limit placeholder not an integer", sql: "UPDATE t SET stock = stock - 1 LIMIT ?", spec: delta("", "0"),
			params: []any{"1 OR 1=1"}, reason: ReasonParamPosition},
		{name: "several rows by key", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id IN (1, 2)",
			spec: RewriteSpec{Column: "stock", Mode: RewriteDelta, Old: []byte("7"), Key: []string{"sku_id"}}, reason: ReasonSeveralRows},
		{name: "several rows by params", sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = ? OR sku_id = ?",
			spec:   RewriteSpec{Column: "stock", Mode: RewriteDelta, Old: []byte("7"), Key: []string{"sku_id"}},
			params: []any{int64(1), int64(2)}, reason: ReasonSeveralRows},
		{name: "several rows without where", sql: "UPDATE sku_stock SET stock = 5",
			spec: RewriteSpec{Column: "stock", Mode: RewriteCAS, Old: []byte("7"), Key: []string{"sku_id"}}, reason: ReasonSeveralRows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, reason, err := rewriteOne(t, tt.sql, tt.stmt, tt.spec, tt.params)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tt.want || ok != (tt.want != "") || reason != tt.reason {
				t.Fatalf("got (%q, %v, %q)\nwant (%q, %v, %q)", got, ok, reason, tt.want, tt.want != "", tt.reason)
			}
			if ok {
				mustOneUpdate(t, got)
			}
		})
	}
}

func TestRewriteUpdateErrors(t *testing.T) {
	const sql = "UPDATE sku_stock SET stock = ? WHERE sku_id = ?"
	tests := []struct {
		name   string
		spec   RewriteSpec
		params []any
		want   error
	}{
		{"unknown mode", RewriteSpec{Column: "stock", Mode: "add"}, []any{int64(1), int64(1)}, ErrRewriteSpec},
		{"bad min", RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "zero"}, []any{int64(1), int64(1)}, ErrRewriteSpec},
		{"min out of range", RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "1e70"}, []any{int64(1), int64(1)}, ErrRewriteSpec},
		{"too few params", delta("1", "0"), []any{int64(1)}, ErrRewriteParams},
		{"unsupported type", delta("1", "0"), []any{int64(1), struct{}{}}, ErrRewriteParams},
		{"unsupported type for the guarded value", delta("1", "0"), []any{true, int64(1)}, ErrRewriteParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, _, err := rewriteOne(t, sql, 0, tt.spec, tt.params)
			if !errors.Is(err, tt.want) || ok || got != "" {
				t.Fatalf("got (%q, %v, %v), want error %v", got, ok, err, tt.want)
			}
		})
	}
	if _, _, reason, err := RewriteUpdate(nil, delta("1", "0"), nil); err != nil || reason != ReasonNotUpdate {
		t.Fatalf("nil facts: reason %q err %v", reason, err)
	}
}

// hostile are parameter values that must stay values.
var hostile = []string{
	"it's", `back\slash`, `\`, `\'`, "''", `\\'' OR 1=1 -- `, "nul\x00byte", "\x00", "ctrl \x1a\n\r\t\b",
	"äöü ✓ 漢字 🙂", "\xff\xfe invalid \xc3", "\xbf\x27 OR 1=1 -- ", "\xbf\x5c\x27; DROP TABLE x; -- ",
	"1; DROP TABLE x", "' OR 1=1 --", "'; DELETE FROM sku_stock; --", "*/ SELECT 1 /*", "`", `"`, "?", "",
	"-- ", "#", strings.Repeat("'\\", 100),
}

// TestRewriteUpdateHostileParams re-parses every rewrite: one statement,
// and its string literals are exactly the parameter bytes.
func TestRewriteUpdateHostileParams(t *testing.T) {
	const sql = "UPDATE sku_stock SET name = ?, stock = ? WHERE sku_id = ? AND note <> ?"
	for _, v := range hostile {
		for _, asBytes := range []bool{false, true} {
			var p any = v
			if asBytes {
				p = []byte(v)
			}
			t.Run(strings.ToValidUTF8(v, "?"), func(t *testing.T) {
				got, ok, reason, err := rewriteOne(t, sql, 0, delta("9", "0"), []any{p, int64(8), p, p})
				if err != nil || !ok {
					t.Fatalf("got (%q, %v, %q, %v)", got, ok, reason, err)
				}
				lits := mustOneUpdate(t, got)
				if len(lits) != 3 || lits[0] != v || lits[1] != v || lits[2] != v {
					t.Fatalf("string literals of %q are %q, want 3 × %q", got, lits, v)
				}
			})
		}
	}
}

// mustOneUpdate parses sql and requires exactly one UPDATE without
// placeholders; it returns the statement's string literals in walk order.
func mustOneUpdate(t testing.TB, sql string) []string {
	t.Helper()
	stmts, err := Parse(sql)
	if err != nil || len(stmts) != 1 {
		t.Fatalf("%q parses to %d statements: %v", sql, len(stmts), err)
	}
	if _, ok := stmts[0].(*ast.UpdateStmt); !ok {
		t.Fatalf("%q parses to %T", sql, stmts[0])
	}
	var c literalCollector
	stmts[0].Accept(&c)
	if c.marks != 0 {
		t.Fatalf("%q still holds %d placeholders", sql, c.marks)
	}
	return c.strs
}

type literalCollector struct {
	strs  []string
	marks int
}

func (c *literalCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *test_driver.ParamMarkerExpr:
		c.marks++
	case *test_driver.ValueExpr:
		if k := x.Kind(); k == test_driver.KindString || k == test_driver.KindBytes {
			c.strs = append(c.strs, x.GetString())
		}
	}
	return n, false
}

func (c *literalCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func TestRewriteSafeCharset(t *testing.T) {
	for cs, want := range map[string]bool{"utf8mb4": true, "latin1": true, "binary": true, "GBK": false, "sjis": false, "big5": false} {
		if got := RewriteSafeCharset(cs); got != want {
			t.Errorf("RewriteSafeCharset(%q) = %v, want %v", cs, got, want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in, want string // want "" for not a number
	}{
		{"17", "17"}, {"17.50", "17.5"}, {"-0.5", "-0.5"}, {"+3", "3"}, {".5", "0.5"}, {"5.", "5"},
		{"1e3", "1000"}, {"1.5E-2", "0.015"}, {"-0", "0"}, {"007", "7"},
		{"", ""}, {"-", ""}, {".", ""}, {"1e", ""}, {"1e+", ""}, {" 1", ""}, {"1 ", ""}, {"0x10", ""},
		{"NaN", ""}, {"Inf", ""}, {"1/2", ""}, {"1_000", ""}, {"1e10000", ""}, {"1..2", ""}, {"--1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, ok := parseNumber(tt.in)
			got := ""
			if ok {
				got, _ = decimalText(r)
			}
			if got != tt.want {
				t.Fatalf("parseNumber(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzRewriteUpdate feeds arbitrary parameter bytes (as strings, as the
// guarded value, as LIMIT) and remembered values: no panic, no error, and
// every rewrite is one UPDATE whose string literals are the input bytes.
func FuzzRewriteUpdate(f *testing.F) {
	for _, v := range hostile {
		f.Add([]byte(v), []byte("7"), int64(1), 0.5, uint8(0))
	}
	f.Add([]byte("19.25"), []byte("17.50"), int64(-3), math.Inf(1), uint8(1))
	f.Add([]byte("3"), []byte("1e3"), int64(0), math.Copysign(0, -1), uint8(2))
	texts := []string{
		"UPDATE sku_stock SET name = ?, stock = ? WHERE sku_id = ? AND note <> ?",
		"UPDATE sku_stock s SET s.stock = s.stock - ?, s.name = ? WHERE s.sku_id = ? OR s.note = ? LIMIT ?",
		"UPDATE sku_stock SET stock = ? WHERE sku_id = ? AND name = ? ORDER BY id LIMIT ?",
	}
	analyses := make([]*Analysis, len(texts))
	for i, s := range texts {
		a, err := Analyze(s, "shop")
		if err != nil || a.Unparsed {
			f.Fatalf("Analyze(%q): %v", s, err)
		}
		analyses[i] = a
	}
	f.Fuzz(func(t *testing.T, data, old []byte, n int64, fl float64, which uint8) {
		a := analyses[int(which)%len(analyses)]
		var params []any
		switch int(which) % len(analyses) {
		case 0:
			params = []any{data, string(data), data, string(data)}
		case 1:
			params = []any{data, string(data), n, data, data}
		case 2:
			params = []any{data, fl, data, string(data)}
		}
		for _, mode := range []string{RewriteDelta, RewriteCAS} {
			spec := RewriteSpec{Column: "stock", Mode: mode, Min: "0", Old: old, Key: []string{"sku_id"}}
			got, ok, reason, err := RewriteUpdate(a.Stmts[0], spec, params)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if !ok {
				if reason == "" || got != "" {
					t.Fatalf("no rewrite without reason: %q %q", got, reason)
				}
				continue
			}
			for _, lit := range mustOneUpdate(t, got) {
				if lit != string(data) {
					t.Fatalf("%q: literal %q, want %q", got, lit, data)
				}
			}
		}
	})
}

func BenchmarkRewriteUpdate(b *testing.B) {
	cases := []struct {
		name   string
		sql    string
		spec   RewriteSpec
		params []any
	}{
		{"delta-params", "UPDATE sku_stock SET stock = ?, updated = NOW() WHERE sku_id = ?", delta("17.50", "0"),
			[]any{[]byte("19.25"), int64(1001)}},
		{"cas-literal", "UPDATE sku_stock SET stock = 9 WHERE sku_id = 1001", cas("10"), nil},
		{"relative", "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = ?", delta("", "0"),
			[]any{int64(1), int64(1001)}},
	}
	for _, c := range cases {
		a, err := Analyze(c.sql, "shop")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, reason, err := RewriteUpdate(a.Stmts[0], c.spec, c.params); !ok || err != nil {
					b.Fatalf("%s %v", reason, err)
				}
			}
		})
	}
}

// TestRewriteGuardedCheck: the check query selects the guard for the
// UPDATE's own WHERE as a locking read, and names what the guard tests.
func TestRewriteGuardedCheck(t *testing.T) {
	tests := []struct {
		name, sql   string
		spec        RewriteSpec
		params      []any
		guard, want string
	}{
		{name: "cas", sql: "UPDATE sku_stock SET stock = 4 WHERE sku_id = 1", spec: cas("5"),
			guard: GuardValue, want: "SELECT `stock` = 5 FROM `sku_stock` WHERE `sku_id` = 1 FOR UPDATE"},
		{name: "delta", sql: "UPDATE sku_stock SET stock = 4 WHERE sku_id = 1", spec: delta("5", "0"),
			guard: GuardMin, want: "SELECT `stock` - 1 >= 0 FROM `sku_stock` WHERE `sku_id` = 1 FOR UPDATE"},
		{name: "delta without min", sql: "UPDATE sku_stock SET stock = 4 WHERE sku_id = 1", spec: delta("5", ""),
			guard: GuardNone, want: ""},
		{name: "relative params", sql: "UPDATE sku_stock s SET s.stock = s.stock - ? WHERE s.sku_id = ? AND note = ?", spec: delta("", "0"),
			params: []any{int64(2), int64(7), "it's"},
			guard:  GuardMin, want: "SELECT `s`.`stock` - 2 >= 0 FROM `sku_stock` AS `s` WHERE `s`.`sku_id` = 7 AND `note` = 'it''s' FOR UPDATE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Analyze(tc.sql, "shop")
			if err != nil || a.Unparsed {
				t.Fatalf("Analyze: %v", err)
			}
			params := tc.params
			if params == nil {
				params = []any{}
			}
			g, ok, reason, err := RewriteGuarded(a.Stmts[0], tc.spec, params)
			if !ok || err != nil {
				t.Fatalf("not rewritten: reason %q err %v", reason, err)
			}
			if g.Guard != tc.guard || g.Check != tc.want {
				t.Errorf("guard %q check %q, want %q %q", g.Guard, g.Check, tc.guard, tc.want)
			}
			if g.Check != "" {
				stmts, err := Parse(g.Check)
				if err != nil || len(stmts) != 1 {
					t.Fatalf("check does not parse back: %v", err)
				}
				if _, isSel := stmts[0].(*ast.SelectStmt); !isSel {
					t.Errorf("check parses as %T", stmts[0])
				}
			}
		})
	}
}

// TestRewriteLeavesSharedFactsAlone: a text UPDATE is rewritten and fenced
// from a copy of its cached node, not a new parse, so many sessions do it
// at once on the same Facts (run under -race), every one gets the same
// statements, each parses back as one UPDATE, and the shared node still
// restores to what it did before.
func TestRewriteLeavesSharedFactsAlone(t *testing.T) {
	a, err := Analyze("UPDATE sku_stock SET stock = 7, note = 'x' WHERE sku_id = 1001 AND (note <> 'y' OR stock > 3)", "shop")
	if err != nil || a.Unparsed {
		t.Fatalf("Analyze: %v", err)
	}
	f := a.Stmts[0]
	before, err := RestoreMode(f.Node, f.Mode)
	if err != nil {
		t.Fatal(err)
	}
	spec := RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", Old: []byte("9"), Key: []string{"sku_id"}, Fence: "fence", FenceToken: 42}
	want, ok, reason, err := RewriteGuarded(f, spec, nil)
	if err != nil || !ok {
		t.Fatalf("RewriteGuarded: %v %s", err, reason)
	}
	wantFence, _, ok, reason, err := FenceUpdate(f, "fence", 43, nil)
	if err != nil || !ok {
		t.Fatalf("FenceUpdate: %v %s", err, reason)
	}
	for _, s := range []string{want.SQL, wantFence} {
		mustOneUpdate(t, s)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				g, _, _, err := RewriteGuarded(f, spec, nil)
				u, _, _, _, ferr := FenceUpdate(f, "fence", 43, nil)
				if err != nil || ferr != nil || g != want || u != wantFence {
					t.Errorf("concurrent rewrite: %+v %q (%v %v); want %+v %q", g, u, err, ferr, want, wantFence)
					return
				}
			}
		}()
	}
	wg.Wait()
	if after, _ := RestoreMode(f.Node, f.Mode); after != before {
		t.Errorf("the shared node changed: %q, was %q", after, before)
	}
}

// FuzzRewriteCopyMatchesReparse: for text UPDATEs with fuzzed literals,
// the rewrite and the fence built from a copy of the cached node are
// exactly those built from a fresh parse of the statement's text, and
// parse back as one UPDATE.
func FuzzRewriteCopyMatchesReparse(f *testing.F) {
	for _, v := range hostile {
		f.Add(v, int64(5), "9", uint8(0))
	}
	f.Add("it's", int64(-3), "1.5", uint8(1))
	f.Add(`a\b`, int64(0), "0", uint8(2))
	shapes := []string{
		"UPDATE sku_stock SET stock = %[2]d, note = %[1]s WHERE sku_id = %[3]s",
		"UPDATE sku_stock s SET s.note = %[1]s, s.stock = s.stock - %[2]d WHERE s.sku_id = %[3]s AND (s.note <> %[1]s OR s.stock > 1) LIMIT 1",
		"UPDATE sku_stock SET stock = stock + %[2]d WHERE sku_id IN (%[3]s, %[2]d) ORDER BY sku_id",
	}
	f.Fuzz(func(t *testing.T, lit string, n int64, key string, which uint8) {
		quoted := "'" + strings.ReplaceAll(strings.ReplaceAll(lit, `\`, `\\`), "'", "''") + "'"
		text := fmt.Sprintf(shapes[int(which)%len(shapes)], quoted, n, key)
		a, err := Analyze(text, "shop")
		if err != nil || a.Unparsed || len(a.Stmts) != 1 {
			return
		}
		st := a.Stmts[0]
		// The TiDB parser keeps a statement's text with a string literal
		// that is not printable UTF-8 turned into a hex literal, which a
		// fresh parse of that text then reads as a binary string: the copy
		// keeps the literal as the client wrote it, so the two are
		// compared only when the text is the client's.
		same := st.Text == strings.Trim(text, " ;")
		for _, mode := range []string{RewriteDelta, RewriteCAS} {
			spec := RewriteSpec{Column: "stock", Mode: mode, Min: "0", Old: []byte(key), Key: []string{"sku_id"}, Fence: "fence", FenceToken: 7}
			g1, ok1, r1, e1 := rewriteGuarded(st, spec, nil, false)
			g2, ok2, r2, e2 := rewriteGuarded(st, spec, nil, true)
			if same && (g1 != g2 || ok1 != ok2 || r1 != r2 || (e1 == nil) != (e2 == nil)) {
				t.Fatalf("%q %s: copy %+v %v %q %v; reparse %+v %v %q %v", text, mode, g1, ok1, r1, e1, g2, ok2, r2, e2)
			}
			if ok1 {
				mustOneUpdate(t, g1.SQL)
			}
		}
		u1, c1, ok1, r1, e1 := fenceUpdate(st, "fence", 9, nil, false)
		u2, c2, ok2, r2, e2 := fenceUpdate(st, "fence", 9, nil, true)
		if same && (u1 != u2 || c1 != c2 || ok1 != ok2 || r1 != r2 || (e1 == nil) != (e2 == nil)) {
			t.Fatalf("%q fence: copy %q %q %v %q %v; reparse %q %q %v %q %v", text, u1, c1, ok1, r1, e1, u2, c2, ok2, r2, e2)
		}
		if ok1 {
			mustOneUpdate(t, u1)
		}
	})
}
