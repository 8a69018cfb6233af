package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// TestNormalizeParam pins the key (or refusal) of typed parameters on each
// kind of key column, including the stored (Assign) use the differential
// test against MariaDB does not reach.
func TestNormalizeParam(t *testing.T) {
	bigint := &Column{Name: "k", DataType: "bigint", ColumnType: "bigint(20)"}
	integer := &Column{Name: "k", DataType: "int", ColumnType: "int(11)"}
	date := &Column{Name: "k", DataType: "date", ColumnType: "date"}
	dt := &Column{Name: "k", DataType: "datetime", ColumnType: "datetime"}
	tm := &Column{Name: "k", DataType: "time", ColumnType: "time"}
	dec := &Column{Name: "k", DataType: "decimal", ColumnType: "decimal(20,2)"}
	str := &Column{Name: "k", DataType: "varchar", ColumnType: "varchar(10)", Collation: "utf8mb4_general_ci"}
	flt := &Column{Name: "k", DataType: "float", ColumnType: "float"}
	t1001 := Param{Type: ParamTime, Time: Temporal{Minute: 10, Second: 1}}
	d0105 := Param{Type: ParamDate, Time: Temporal{Year: 2024, Month: 1, Day: 5}}
	dt0105 := Param{Type: ParamDateTime, Time: Temporal{Year: 2024, Month: 1, Day: 5, Hour: 10}}
	tests := []struct {
		name string
		col  *Column
		p    Param
		use  Use
		want string // "" refused
	}{
		{"TIME on BIGINT", bigint, t1001, Compare, "1001"},
		{"TIME stored into BIGINT", bigint, t1001, Assign, ""},
		{"TIME on INT", integer, t1001, Compare, ""},
		{"negative TIME with days", bigint, Param{Type: ParamTime, Time: Temporal{Neg: true, Day: 1, Hour: 2, Micro: 5}}, Compare, "-260000.000005"},
		{"TIME at the clip", bigint, Param{Type: ParamTime, Time: Temporal{Hour: 838}}, Compare, ""},
		{"DATE on DATE", date, d0105, Compare, "2024-01-05 00:00:00"},
		{"DATETIME on DATE", date, dt0105, Compare, "2024-01-05 10:00:00"},
		{"DATETIME stored into DATE loses its clock", date, dt0105, Assign, ""},
		{"DATE stored into DATE", date, d0105, Assign, "2024-01-05 00:00:00"},
		{"DATETIME with micro stored", dt, Param{Type: ParamDateTime, Time: Temporal{Year: 2024, Month: 1, Day: 5, Micro: 1}}, Assign, ""},
		{"TIME on DATETIME depends on today", dt, t1001, Compare, ""},
		{"TIME on TIME", tm, t1001, Compare, "00:10:01"},
		{"TIME stored into TIME", tm, t1001, Assign, "00:10:01"},
		{"DATE on TIME", tm, d0105, Compare, ""},
		{"invalid date", date, Param{Type: ParamDate, Time: Temporal{Year: 2023, Month: 2, Day: 29}}, Compare, ""},
		{"leap day", date, Param{Type: ParamDate, Time: Temporal{Year: 2024, Month: 2, Day: 29}}, Compare, "2024-02-29 00:00:00"},
		{"DATE on varchar", str, d0105, Compare, ""},
		{"double on a DECIMAL of 20 digits", dec, Param{Type: ParamDouble, Float: 1.5}, Compare, ""},
		{"double stored into DECIMAL", dec, Param{Type: ParamDouble, Float: 1.5}, Assign, "1.5"},
		{"double on FLOAT", flt, Param{Type: ParamDouble, Float: 1.5}, Compare, ""},
		{"double on unknown column", nil, Param{Type: ParamDouble, Float: 1.5}, Compare, ""},
		{"decimal with exponent", bigint, Param{Type: ParamDecimal, Bytes: []byte("1e3")}, Compare, ""},
		{"decimal stored into varchar", str, Param{Type: ParamDecimal, Bytes: []byte("1.50")}, Assign, ""},
		{"integer stored into varchar", str, Param{Type: ParamInt, Int: 1001}, Assign, "1001"},
		{"blob on varchar folds", str, Param{Type: ParamBlob, Bytes: []byte("ABC ")}, Compare, "abc"},
		{"NULL", bigint, Param{Type: ParamNull}, Compare, ""},
		{"unknown type", bigint, Param{Type: ParamOther, Wire: 9}, Compare, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeParam(tt.col, tt.p, tt.use)
			switch {
			case tt.want == "" && err == nil:
				t.Fatalf("%s: keyed %q, want refused", tt.p, got)
			case tt.want == "" && !errors.Is(err, ErrUnkeyable):
				t.Fatalf("%s: error %v does not wrap ErrUnkeyable", tt.p, err)
			case tt.want != "" && (err != nil || string(got) != tt.want):
				t.Fatalf("%s: got %q, %v; want %q", tt.p, got, err, tt.want)
			}
		})
	}
}

// TestBindTypedParam binds typed parameters: a TIME on a BIGINT key is
// the row MariaDB compares it with; on an INT key it is refused, naming
// the column, the parameter's position and its type and value.
func TestBindTypedParam(t *testing.T) {
	f := &parser.Facts{Kind: parser.KindUpdate, Tables: []parser.TableRef{ref("shop", "sku_stock", true,
		or(parser.Conj{eq("sku_id", param(1))}))}}
	params := []any{Param{Type: ParamInt, Int: 3}, Param{Type: ParamTime, Time: Temporal{Minute: 10, Second: 1}}}
	for _, tt := range []struct{ dataType, keys, reason string }{
		{"bigint", "sku-stock=shop.sku_stock/1001", ""},
		{"int", "", "sku_id: parameter 2: TIME 00:10:01 compares as a date/time with int column sku_id"},
	} {
		info := &TableInfo{Schema: "shop", Name: "sku_stock", Columns: map[string]Column{
			"sku_id": {Name: "sku_id", DataType: tt.dataType, ColumnType: tt.dataType},
		}, UniqueKeys: [][]string{{"sku_id"}}}
		d := matchSet(t, NewSchema(info)).Match(f, "shop", false).Bind(params)
		if keyNames(d) != tt.keys || d.Reject != (tt.reason != "") || !strings.Contains(d.RejectReason(), tt.reason) {
			t.Errorf("%s key: keys=%q reject=%v %q", tt.dataType, keyNames(d), d.Reject, d.RejectReason())
		}
	}
}

// TestBindTemporalInList: alone, a DATE parameter meets a BIGINT key as the
// number YYYYMMDD; among several values MariaDB may compare the list as
// dates (1001 is 2000-10-01 then), so no key set covers it.
func TestBindTemporalInList(t *testing.T) {
	info := &TableInfo{Schema: "shop", Name: "sku_stock", Columns: map[string]Column{
		"sku_id": {Name: "sku_id", DataType: "bigint", ColumnType: "bigint(20)"},
	}, UniqueKeys: [][]string{{"sku_id"}}}
	rs := matchSet(t, NewSchema(info))
	date := Param{Type: ParamDate, Time: Temporal{Year: 2000, Month: 10, Day: 1}}
	one := &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("shop", "sku_stock", true,
		or(parser.Conj{eq("sku_id", param(0))}))}}
	if d := rs.Match(one, "shop", false).Bind([]any{date}); d.Reject || keyNames(d) != "sku-stock=shop.sku_stock/20001001" {
		t.Fatalf("alone: keys=%q %q", keyNames(d), d.RejectReason())
	}
	list := &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("shop", "sku_stock", true,
		or(parser.Conj{eq("sku_id", param(0))}, parser.Conj{eq("sku_id", param(1))}))}}
	d := rs.Match(list, "shop", false).Bind([]any{date, Param{Type: ParamInt, Int: 100}})
	if !d.Reject || !strings.Contains(d.RejectReason(), "parameter 1: a date or time among several values") {
		t.Fatalf("in a list: keys=%q reject=%v %q", keyNames(d), d.Reject, d.RejectReason())
	}
	// A literal beside the parameter makes a list too.
	mixed := &parser.Facts{Kind: parser.KindDelete, Tables: []parser.TableRef{ref("shop", "sku_stock", true,
		or(parser.Conj{eq("sku_id", vInt(100))}, parser.Conj{eq("sku_id", param(0))}))}}
	d = rs.Match(mixed, "shop", false).Bind([]any{date})
	if !d.Reject || !strings.Contains(d.RejectReason(), "parameter 1: a date or time among several values") {
		t.Fatalf("beside a literal: keys=%q reject=%v %q", keyNames(d), d.Reject, d.RejectReason())
	}
}

// TestHexStoredIntoNumber: X'044C' compares with an integer column as
// 1100, but stored into one it converts as the binary string it is.
func TestHexStoredIntoNumber(t *testing.T) {
	hex := parser.Value{Kind: parser.ValueHex, Str: "\x04L", Text: "x'044c'"}
	for _, dt := range []string{"bigint", "decimal"} {
		col := &Column{Name: "k", DataType: dt, ColumnType: dt}
		if n, err := Normalize(col, hex, Compare); err != nil || (dt == "bigint" && string(n) != "1100") {
			t.Errorf("%s compare: %q %v", dt, n, err)
		}
		if n, err := Normalize(col, hex, Assign); err == nil {
			t.Errorf("%s assign: keyed %q, want a refusal", dt, n)
		}
	}
}
