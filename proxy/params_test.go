package proxy

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/lockproxy/lockproxy/rules"
)

// TestExecuteParamsKeepTypes decodes execute packets built by
// buildExecute and checks each parameter's type and value as MariaDB
// reads them.
func TestExecuteParamsKeepTypes(t *testing.T) {
	p := func(typ rules.ParamType, wire byte) rules.Param { return rules.Param{Type: typ, Wire: wire} }
	withInt := func(wire byte, v int64) rules.Param { x := p(rules.ParamInt, wire); x.Int = v; return x }
	withBytes := func(typ rules.ParamType, wire byte, s string) rules.Param {
		x := p(typ, wire)
		x.Bytes = []byte(s)
		return x
	}
	withTime := func(typ rules.ParamType, wire byte, tm rules.Temporal) rules.Param {
		x := p(typ, wire)
		x.Time = tm
		return x
	}
	maxU := p(rules.ParamUint, mysql.MYSQL_TYPE_LONGLONG)
	maxU.Uint = math.MaxUint64
	float := p(rules.ParamDouble, mysql.MYSQL_TYPE_FLOAT)
	float.Float = float64(float32(1.1))
	tests := []struct {
		name   string
		params []typedParam
		long   map[int][]byte
		want   []rules.Param
	}{
		{"integers", []typedParam{wireInt(mysql.MYSQL_TYPE_TINY, -5), wireInt(mysql.MYSQL_TYPE_SHORT, -300), wireInt(mysql.MYSQL_TYPE_LONG, 1001),
			wireUint(mysql.MYSQL_TYPE_LONGLONG, math.MaxUint64)},
			nil, []rules.Param{withInt(mysql.MYSQL_TYPE_TINY, -5), withInt(mysql.MYSQL_TYPE_SHORT, -300), withInt(mysql.MYSQL_TYPE_LONG, 1001), maxU}},
		{"float widened", []typedParam{wireFloat(1.1)}, nil, []rules.Param{float}},
		{"text types", []typedParam{wireText(tNewDec, "1.50"), wireText(tVarStr, "abc"), wireText(tBlob, "\x00\xff"), wireText(mysql.MYSQL_TYPE_ENUM, "x")}, nil,
			[]rules.Param{withBytes(rules.ParamDecimal, tNewDec, "1.50"), withBytes(rules.ParamString, tVarStr, "abc"),
				withBytes(rules.ParamBlob, tBlob, "\x00\xff"), withBytes(rules.ParamString, mysql.MYSQL_TYPE_ENUM, "x")}},
		{"DATE keeps only its date", []typedParam{wireDate(tDate, 2024, 1, 5, 10, 0, 1, 7)}, nil,
			[]rules.Param{withTime(rules.ParamDate, tDate, rules.Temporal{Year: 2024, Month: 1, Day: 5})}},
		{"DATETIME", []typedParam{wireDate(mysql.MYSQL_TYPE_TIMESTAMP, 2024, 1, 5, 10, 0, 1, 7)}, nil,
			[]rules.Param{withTime(rules.ParamDateTime, mysql.MYSQL_TYPE_TIMESTAMP, rules.Temporal{Year: 2024, Month: 1, Day: 5, Hour: 10, Second: 1, Micro: 7})}},
		{"TIME negative with days", []typedParam{wireTime(true, 2, 3, 4, 5, 6), wireTime(false, 0, 0, 0, 0, 0)}, nil,
			[]rules.Param{withTime(rules.ParamTime, mysql.MYSQL_TYPE_TIME, rules.Temporal{Neg: true, Day: 2, Hour: 3, Minute: 4, Second: 5, Micro: 6}),
				p(rules.ParamTime, mysql.MYSQL_TYPE_TIME)}},
		{"NULL by bitmap and by type", []typedParam{wireNull(), {typ: tLonglong, null: true}, wireInt(tLonglong, 7)}, nil,
			[]rules.Param{p(rules.ParamNull, mysql.MYSQL_TYPE_NULL), p(rules.ParamNull, tLonglong), withInt(tLonglong, 7)}},
		{"long data", []typedParam{{typ: tBlob}, {typ: tLonglong}, wireInt(tLonglong, 7)}, map[int][]byte{0: []byte("abc"), 1: []byte("1001")},
			[]rules.Param{withBytes(rules.ParamBlob, tBlob, "abc"), p(rules.ParamOther, tLonglong), withInt(tLonglong, 7)}},
		{"YEAR loses the parameters after it", []typedParam{wireInt(tLonglong, 1), wireInt(mysql.MYSQL_TYPE_YEAR, 2024), wireInt(tLonglong, 7), wireNull()}, nil,
			[]rules.Param{withInt(tLonglong, 1), p(rules.ParamOther, mysql.MYSQL_TYPE_YEAR), p(rules.ParamOther, tLonglong), p(rules.ParamOther, mysql.MYSQL_TYPE_NULL)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkt := buildExecute(1, tt.params)
			types, _ := executeParamTypes(pkt, len(tt.params))
			got, err := executeParams(pkt, len(tt.params), types, tt.long)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if !reflect.DeepEqual(g, tt.want[i]) {
					t.Errorf("parameter %d (%s): got %+v, want %+v", i+1, tt.params[i], g, tt.want[i])
				}
			}
		})
	}
}

// TestExecuteParamsMalformed: a value cut short or with a length MariaDB
// does not define is an error, never a guessed value.
func TestExecuteParamsMalformed(t *testing.T) {
	for _, pkt := range [][]byte{
		buildExecute(1, []typedParam{wireInt(tLonglong, 1)})[:20],
		buildExecute(1, []typedParam{{typ: mysql.MYSQL_TYPE_TIME, value: []byte{5, 0, 0, 0, 0, 0}}}),
		buildExecute(1, []typedParam{{typ: tDate, value: []byte{3, 1, 2, 3}}}),
		buildExecute(1, []typedParam{{typ: tVarStr, value: []byte{9, 'a'}}}),
	} {
		types, _ := executeParamTypes(pkt, 1)
		if _, err := executeParams(pkt, 1, types, nil); !errors.Is(err, errBadParams) {
			t.Errorf("% x: want errBadParams, got %v", pkt, err)
		}
	}
}

// FuzzExecuteParams: any packet decodes to parameters or errBadParams,
// and a parameter of an unknown type is never followed by a known one.
func FuzzExecuteParams(f *testing.F) {
	f.Add(buildExecute(1, []typedParam{wireTime(true, 1, 2, 3, 4, 5), wireText(tVarStr, "x")}), uint8(2))
	f.Add(buildExecute(1, []typedParam{wireInt(mysql.MYSQL_TYPE_INT24, 1), wireInt(tLonglong, 7)}), uint8(2))
	f.Add(buildExecute(1, []typedParam{wireDate(tDatetime, 2024, 1, 5, 1, 2, 3, 4)}), uint8(1))
	f.Fuzz(func(t *testing.T, pkt []byte, n uint8) {
		types, ok := executeParamTypes(pkt, int(n))
		if !ok {
			return
		}
		params, err := executeParams(pkt, int(n), types, nil)
		if err != nil {
			if !errors.Is(err, errBadParams) {
				t.Fatalf("error not errBadParams: %v", err)
			}
			return
		}
		lost := false
		for _, x := range params {
			prm := x.(rules.Param)
			if lost && prm.Type != rules.ParamOther {
				t.Fatalf("a known parameter after an unknown one: %+v", params)
			}
			lost = lost || prm.Type == rules.ParamOther
		}
	})
}
