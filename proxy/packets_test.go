package proxy

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// typedParam is one COM_STMT_EXECUTE parameter exactly as a client puts
// it on the wire: its protocol type, unsigned flag and encoded value. Go
// drivers choose the type from the Go value; tests that need a TIME, a
// DECIMAL or a BLOB build them here.
type typedParam struct {
	typ      byte
	unsigned bool
	null     bool
	value    []byte // binary-protocol encoding, without the type
	label    string // for test names: "TIME 00:10:01"
}

func (p typedParam) String() string { return p.label }

// buildExecute returns a COM_STMT_EXECUTE payload (command byte first) for
// statement stmtID with params newly bound, no cursor, one iteration.
func buildExecute(stmtID uint32, params []typedParam) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, stmtID)
	b = binary.LittleEndian.AppendUint32(append(b, 0), 1)
	if len(params) == 0 {
		return b
	}
	nulls := make([]byte, (len(params)+7)/8)
	var types, vals []byte
	for i, p := range params {
		flag := byte(0)
		if p.unsigned {
			flag = 0x80
		}
		types = append(types, p.typ, flag)
		if p.null {
			nulls[i/8] |= 1 << (i % 8)
			continue
		}
		vals = append(vals, p.value...)
	}
	b = append(append(append(b, nulls...), 1), types...)
	return append(b, vals...)
}

// wireInt is a signed TINY, SHORT, LONG, INT24, YEAR or LONGLONG.
func wireInt(typ byte, v int64) typedParam {
	return typedParam{typ: typ, value: intBytes(typ, uint64(v)), label: fmt.Sprintf("%s %d", typeName(typ), v)}
}

// wireUint is an integer type with the unsigned flag.
func wireUint(typ byte, v uint64) typedParam {
	return typedParam{typ: typ, unsigned: true, value: intBytes(typ, v), label: fmt.Sprintf("%s unsigned %d", typeName(typ), v)}
}

func intBytes(typ byte, v uint64) []byte {
	switch typ {
	case mysql.MYSQL_TYPE_TINY:
		return []byte{byte(v)}
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		return binary.LittleEndian.AppendUint16(nil, uint16(v))
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
		return binary.LittleEndian.AppendUint32(nil, uint32(v))
	}
	return binary.LittleEndian.AppendUint64(nil, v)
}

func wireDouble(f float64) typedParam {
	return typedParam{typ: mysql.MYSQL_TYPE_DOUBLE, value: binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), label: fmt.Sprintf("DOUBLE %v", f)}
}

func wireFloat(f float32) typedParam {
	return typedParam{typ: mysql.MYSQL_TYPE_FLOAT, value: binary.LittleEndian.AppendUint32(nil, math.Float32bits(f)), label: fmt.Sprintf("FLOAT %v", f)}
}

// wireText is a length-encoded value: strings, blobs, decimals, BIT.
func wireText(typ byte, s string) typedParam {
	return typedParam{typ: typ, value: append(mysql.PutLengthEncodedInt(uint64(len(s))), s...), label: fmt.Sprintf("%s %q", typeName(typ), s)}
}

func wireNull() typedParam {
	return typedParam{typ: mysql.MYSQL_TYPE_NULL, null: true, label: "NULL"}
}

// wireDate is a DATE, DATETIME or TIMESTAMP in its shortest encoding.
func wireDate(typ byte, y, mo, d, h, mi, s, us int) typedParam {
	v := binary.LittleEndian.AppendUint16(nil, uint16(y))
	v = append(v, byte(mo), byte(d))
	switch {
	case us != 0:
		v = binary.LittleEndian.AppendUint32(append(v, byte(h), byte(mi), byte(s)), uint32(us))
	case h+mi+s != 0:
		v = append(v, byte(h), byte(mi), byte(s))
	}
	label := fmt.Sprintf("%s %04d-%02d-%02d %02d:%02d:%02d.%06d", typeName(typ), y, mo, d, h, mi, s, us)
	return typedParam{typ: typ, value: append([]byte{byte(len(v))}, v...), label: label}
}

// wireTime is a TIME: sign, days, hours (0-23 on the wire), minutes,
// seconds, microseconds.
func wireTime(neg bool, days uint32, h, mi, s, us int) typedParam {
	sign := byte(0)
	if neg {
		sign = 1
	}
	v := binary.LittleEndian.AppendUint32([]byte{sign}, days)
	v = append(v, byte(h), byte(mi), byte(s))
	if us != 0 {
		v = binary.LittleEndian.AppendUint32(v, uint32(us))
	}
	label := fmt.Sprintf("TIME neg=%v %dd %02d:%02d:%02d.%06d", neg, days, h, mi, s, us)
	return typedParam{typ: mysql.MYSQL_TYPE_TIME, value: append([]byte{byte(len(v))}, v...), label: label}
}

func typeName(typ byte) string {
	names := map[byte]string{
		mysql.MYSQL_TYPE_TINY: "TINY", mysql.MYSQL_TYPE_SHORT: "SHORT", mysql.MYSQL_TYPE_LONG: "LONG",
		mysql.MYSQL_TYPE_INT24: "INT24", mysql.MYSQL_TYPE_LONGLONG: "LONGLONG", mysql.MYSQL_TYPE_YEAR: "YEAR",
		mysql.MYSQL_TYPE_DECIMAL: "DECIMAL", mysql.MYSQL_TYPE_NEWDECIMAL: "NEWDECIMAL",
		mysql.MYSQL_TYPE_VARCHAR: "VARCHAR", mysql.MYSQL_TYPE_VAR_STRING: "VAR_STRING", mysql.MYSQL_TYPE_STRING: "STRING",
		mysql.MYSQL_TYPE_TINY_BLOB: "TINY_BLOB", mysql.MYSQL_TYPE_BLOB: "BLOB", mysql.MYSQL_TYPE_MEDIUM_BLOB: "MEDIUM_BLOB",
		mysql.MYSQL_TYPE_LONG_BLOB: "LONG_BLOB", mysql.MYSQL_TYPE_BIT: "BIT", mysql.MYSQL_TYPE_DATE: "DATE",
		mysql.MYSQL_TYPE_DATETIME: "DATETIME", mysql.MYSQL_TYPE_TIMESTAMP: "TIMESTAMP", mysql.MYSQL_TYPE_ENUM: "ENUM",
		mysql.MYSQL_TYPE_JSON: "JSON",
	}
	if n, ok := names[typ]; ok {
		return n
	}
	return fmt.Sprintf("type%d", typ)
}

// executeTyped sends buildExecute on r and reads the result (binary rows
// rendered as text).
func (r *rawConn) executeTyped(id uint32, params ...typedParam) (*mysql.Result, []string, error) {
	r.t.Helper()
	r.send(buildExecute(id, params)...)
	return r.result(true)
}
