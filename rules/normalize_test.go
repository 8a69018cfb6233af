package rules

import (
	"errors"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

func vInt(i int64) parser.Value { return parser.Value{Kind: parser.ValueInt, Int: i, Text: "int"} }
func vStr(s string) parser.Value {
	return parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}
}
func vDec(s string) parser.Value { return parser.Value{Kind: parser.ValueDecimal, Str: s, Text: s} }
func vFloat(f float64) parser.Value {
	return parser.Value{Kind: parser.ValueFloat, Float: f, Text: "float"}
}
func vHex(b string) parser.Value { return parser.Value{Kind: parser.ValueHex, Str: b, Text: "0x.."} }

var (
	colInt     = &Column{Name: "id", DataType: "int", ColumnType: "int(11)"}
	colBig     = &Column{Name: "id", DataType: "bigint", ColumnType: "bigint(20) unsigned", Unsigned: true}
	colDec     = &Column{Name: "price", DataType: "decimal", ColumnType: "decimal(10,2)"}
	colCI      = &Column{Name: "sku", DataType: "varchar", ColumnType: "varchar(32)", Collation: "utf8mb4_general_ci"}
	colUCI     = &Column{Name: "sku", DataType: "varchar", ColumnType: "varchar(32)", Collation: "utf8mb4_unicode_ci"}
	colBin     = &Column{Name: "sku", DataType: "varchar", ColumnType: "varchar(32)", Collation: "utf8mb4_bin"}
	colNoPad   = &Column{Name: "sku", DataType: "varchar", ColumnType: "varchar(32)", Collation: "utf8mb4_nopad_bin"}
	colVarbin  = &Column{Name: "h", DataType: "varbinary", ColumnType: "varbinary(16)"}
	colBinary4 = &Column{Name: "h", DataType: "binary", ColumnType: "binary(4)"}
	colDate    = &Column{Name: "d", DataType: "date", ColumnType: "date"}
)

func TestNormalizeSameKey(t *testing.T) {
	// Each group: spellings MySQL takes for one row must give one key.
	tests := []struct {
		name string
		col  *Column
		use  Use
		vals []parser.Value
	}{
		{"int spellings", colInt, Compare, []parser.Value{vInt(1001), vStr("1001"), vStr("  1001"), vStr("1001.0"), vDec("1001.0"), vFloat(1001), vHex("\x03\xe9"), vStr("1001abc"), vStr("1.001e3")}},
		{"int zero", colInt, Compare, []parser.Value{vInt(0), vStr("abc"), vStr(""), vStr("-0")}},
		{"int insert rounds", colInt, Assign, []parser.Value{vInt(1002), vDec("1001.5"), vDec("1002.4")}},
		{"bigint unsigned", colBig, Compare, []parser.Value{{Kind: parser.ValueUint, Uint: 18446744073709551615}, vDec("18446744073709551615")}},
		{"decimal insert rounds to scale", colDec, Assign, []parser.Value{vDec("1.11"), vDec("1.105"), vStr("1.1050"), vDec("1.114")}},
		{"decimal", colDec, Compare, []parser.Value{vDec("1.10"), vDec("01.1"), vStr("1.1"), vFloat(1.1), vStr(" 1.100")}},
		{"general_ci", colCI, Compare, []parser.Value{vStr("ABC"), vStr("abc"), vStr("abc  "), vStr("Àbc"), vStr("a\u0301bc")}},
		{"general_ci sharp s", colCI, Compare, []parser.Value{vStr("ß"), vStr("s"), vStr("S")}},
		{"general_ci supplementary", colCI, Compare, []parser.Value{vStr("😀"), vStr("😁")}},
		{"unicode_ci expansions", colUCI, Compare, []parser.Value{vStr("Æble"), vStr("aeble"), vStr("AEBLE")}},
		{"unicode_ci compatibility", colUCI, Compare, []parser.Value{vStr("ﬁx"), vStr("fix"), vStr("FIX")}},
		{"bin pad space", colBin, Compare, []parser.Value{vStr("abc"), vStr("abc   ")}},
		{"binary pads with NUL", colBinary4, Assign, []parser.Value{vStr("ab"), vStr("ab\x00\x00")}},
		{"date", colDate, Compare, []parser.Value{vStr("2024-01-05"), vStr("2024-1-5"), vStr("2024/01/05"), vStr("20240105"), vInt(20240105), vStr("2024-01-05 00:00:00")}},
		{"unknown column", nil, Compare, []parser.Value{vInt(7), vStr("7"), vStr(" 7 "), vDec("7.0")}},
		{"unknown column text", nil, Compare, []parser.Value{vStr("Abc"), vStr("abc "), vStr("ABC")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, err := Normalize(tt.col, tt.vals[0], tt.use)
			if err != nil {
				t.Fatalf("Normalize(%s): %v", tt.vals[0].Text, err)
			}
			for _, v := range tt.vals[1:] {
				got, err := Normalize(tt.col, v, tt.use)
				if err != nil {
					t.Fatalf("Normalize(%q): %v", v.Str+v.Text, err)
				}
				if string(got) != string(first) {
					t.Errorf("%v (%q) gives %q, %v gives %q", v.Kind, v.Str, got, tt.vals[0].Kind, first)
				}
			}
		})
	}
}

func TestNormalizeDifferentKey(t *testing.T) {
	tests := []struct {
		name string
		col  *Column
		a, b parser.Value
	}{
		{"int", colInt, vInt(1001), vInt(1002)},
		{"int vs fraction", colInt, vInt(1001), vDec("1001.5")},
		{"bin case", colBin, vStr("abc"), vStr("ABC")},
		{"nopad trailing space", colNoPad, vStr("abc"), vStr("abc ")},
		{"varbinary trailing space", colVarbin, vStr("abc"), vStr("abc ")},
		{"varbinary case", colVarbin, vStr("abc"), vStr("ABC")},
		{"ci different letters", colCI, vStr("abc"), vStr("abd")},
		{"decimal", colDec, vDec("1.1"), vDec("1.01")},
		{"date", colDate, vStr("2024-01-05"), vStr("2024-01-06")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, errA := Normalize(tt.col, tt.a, Compare)
			b, errB := Normalize(tt.col, tt.b, Compare)
			if errA != nil || errB != nil {
				t.Fatalf("errors: %v, %v", errA, errB)
			}
			if string(a) == string(b) {
				t.Errorf("%q and %q share key %q", tt.a.Str+tt.a.Text, tt.b.Str+tt.b.Text, a)
			}
		})
	}
}

func TestNormalizeUnkeyable(t *testing.T) {
	tests := []struct {
		name string
		col  *Column
		v    parser.Value
		use  Use
	}{
		{"null", colInt, parser.Value{Kind: parser.ValueNull, Text: "NULL"}, Compare},
		{"expr", colInt, parser.Value{Kind: parser.ValueExpr, Text: "NOW()"}, Compare},
		{"unbound param", colInt, parser.Value{Kind: parser.ValueParam, Param: 0, Text: "?"}, Compare},
		{"number vs string column", colCI, vInt(1001), Compare},
		{"string beyond 2^53 vs int", colBig, vStr("9007199254740993"), Compare},
		{"odd date", colDate, vStr("next tuesday"), Compare},
		{"hex on unknown column", nil, vHex("ab"), Compare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.col, tt.v, tt.use)
			if !errors.Is(err, ErrUnkeyable) {
				t.Fatalf("Normalize = %q, %v; want ErrUnkeyable", got, err)
			}
		})
	}
}

func TestCanonDecimal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1001", "1001"}, {"001001.000", "1001"}, {"-0.0", "0"}, {"1.5e3", "1500"},
		{"1e-2", "0.01"}, {".5", "0.5"}, {"5.", "5"}, {"-12.340", "-12.34"}, {"+7", "7"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := canonDecimal(tt.in)
			if !ok || got != tt.want {
				t.Fatalf("canonDecimal(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
	for _, bad := range []string{"", ".", "1e", "1e999999", "abc", "1.2.3", "--1"} {
		if got, ok := canonDecimal(bad); ok {
			t.Errorf("canonDecimal(%q) = %q, want rejection", bad, got)
		}
	}
}
