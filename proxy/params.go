package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/lockproxy/lockproxy/rules"
)

var errBadParams = errors.New("proxy: malformed COM_STMT_EXECUTE parameters")

// errNoParamTypes is a first execute of a statement with parameters that
// sends no parameter types: MariaDB answers it with 1835, and so does
// lockproxy (clients such as Connector/Node tell it by that code).
var errNoParamTypes = errors.New("proxy: COM_STMT_EXECUTE without parameter types")

// executeParams decodes the parameter values of a COM_STMT_EXECUTE payload
// as MariaDB reads them, each a rules.Param that keeps the type the client
// sent (so a TIME is keyed as a time, not as its text). types are the
// 2-byte parameter types in force (sent now or remembered from an earlier
// execute); long holds values sent with COM_STMT_SEND_LONG_DATA, which the
// packet itself does not carry.
//
// MariaDB reads some type codes otherwise than the protocol describes them
// (INT24, YEAR, BIT and GEOMETRY as NULL taking no bytes) or refuses them
// (JSON): such a parameter, and every one after it, whose bytes lockproxy
// can no longer be sure to find where MariaDB does, is rules.ParamOther,
// which never names a row.
func executeParams(p []byte, n int, types []byte, long map[int][]byte) ([]any, error) {
	if n == 0 {
		return nil, nil
	}
	if len(types) < 2*n {
		return nil, errBadParams
	}
	nullStart := 10
	pos := nullStart + (n+7)/8
	if pos >= len(p) {
		return nil, errBadParams
	}
	nulls := p[nullStart:pos]
	if p[pos] == 1 {
		pos += 1 + 2*n
	} else {
		pos++
	}
	out := make([]any, n)
	lost := false
	for i := 0; i < n; i++ {
		typ, unsigned := types[2*i], types[2*i+1]&0x80 != 0
		switch v, isLong := long[i]; {
		case lost:
			out[i] = rules.Param{Type: rules.ParamOther, Wire: typ}
		case nulls[i/8]&(1<<(i%8)) != 0:
			out[i] = rules.Param{Type: rules.ParamNull, Wire: typ}
		case isLong:
			out[i] = longParam(typ, v)
		default:
			prm, next, err := paramValue(p, pos, typ, unsigned)
			if err != nil {
				return nil, fmt.Errorf("%w: parameter %d: %v", errBadParams, i+1, err)
			}
			lost = prm.Type == rules.ParamOther
			out[i], pos = prm, next
		}
	}
	return out, nil
}

// plainParams maps typed parameters to the plain Go values (nil, int64,
// uint64, float64, []byte) that the statement rewriter renders as
// literals. A parameter without a literal of the same meaning (a TIME, a
// DATE) stays a rules.Param, which the rewriter refuses: the statement
// then runs as sent, under the locks of its typed keys.
func plainParams(params []any) []any {
	if params == nil {
		return nil
	}
	out := make([]any, len(params))
	for i, x := range params {
		out[i] = x
		if p, ok := x.(rules.Param); ok {
			if v, ok := p.Plain(); ok {
				out[i] = v
			}
		}
	}
	return out
}

// longParam is a parameter whose value came by COM_STMT_SEND_LONG_DATA:
// MariaDB takes it as a string of the declared string or blob type.
func longParam(typ byte, v []byte) rules.Param {
	switch paramKind(typ) {
	case rules.ParamString, rules.ParamBlob:
		return rules.Param{Type: paramKind(typ), Wire: typ, Bytes: v}
	}
	return rules.Param{Type: rules.ParamOther, Wire: typ}
}

// paramKind groups a protocol type code by how MariaDB 10.11 reads a
// parameter of that type.
func paramKind(typ byte) rules.ParamType {
	switch typ {
	case mysql.MYSQL_TYPE_NULL:
		return rules.ParamNull
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		return rules.ParamInt
	case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		return rules.ParamDouble
	case mysql.MYSQL_TYPE_DECIMAL, mysql.MYSQL_TYPE_NEWDECIMAL:
		return rules.ParamDecimal
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
		return rules.ParamString
	case mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB, mysql.MYSQL_TYPE_BLOB:
		return rules.ParamBlob
	case mysql.MYSQL_TYPE_DATE:
		return rules.ParamDate
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP:
		return rules.ParamDateTime
	case mysql.MYSQL_TYPE_TIME:
		return rules.ParamTime
	}
	return rules.ParamOther
}

// paramValue decodes one parameter of type typ at p[pos:] the way MariaDB
// reads it. A type it does not know comes back as ParamOther with pos
// unmoved (its size is unknown).
func paramValue(p []byte, pos int, typ byte, unsigned bool) (rules.Param, int, error) {
	prm := rules.Param{Type: paramKind(typ), Wire: typ}
	switch prm.Type {
	case rules.ParamNull, rules.ParamOther:
		return prm, pos, nil
	case rules.ParamDate, rules.ParamDateTime:
		return paramDateTime(p, pos, prm)
	case rules.ParamTime:
		return paramTime(p, pos, prm)
	case rules.ParamDecimal, rules.ParamString, rules.ParamBlob:
		s, next, err := readLenEncString(p, pos)
		if err != nil {
			return prm, pos, err
		}
		prm.Bytes = append([]byte(nil), s...)
		return prm, next, nil
	}
	v, next, err := binaryValue(p, pos, typ, unsigned)
	if err != nil {
		return prm, pos, err
	}
	switch x := v.(type) {
	case int64:
		prm.Int = x
	case uint64:
		prm.Type, prm.Uint = rules.ParamUint, x
	case float64:
		prm.Float = x
	}
	return prm, next, nil
}

// paramDateTime decodes a DATE, DATETIME or TIMESTAMP parameter; MariaDB
// reads only the date of a DATE, whatever the length.
func paramDateTime(p []byte, pos int, prm rules.Param) (rules.Param, int, error) {
	if pos >= len(p) {
		return prm, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 4 && n != 7 && n != 11) {
		return prm, pos, errShortPacket
	}
	b, t := p[pos:pos+n], &prm.Time
	if n >= 4 {
		t.Year, t.Month, t.Day = int(binary.LittleEndian.Uint16(b)), int(b[2]), int(b[3])
	}
	if n >= 7 && prm.Type == rules.ParamDateTime {
		t.Hour, t.Minute, t.Second = int(b[4]), int(b[5]), int(b[6])
	}
	if n == 11 && prm.Type == rules.ParamDateTime {
		t.Micro = int(binary.LittleEndian.Uint32(b[7:]))
	}
	return prm, pos + n, nil
}

// paramTime decodes a TIME parameter (length 0 is 00:00:00).
func paramTime(p []byte, pos int, prm rules.Param) (rules.Param, int, error) {
	if pos >= len(p) {
		return prm, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 8 && n != 12) {
		return prm, pos, errShortPacket
	}
	if n == 0 {
		return prm, pos, nil
	}
	b, t := p[pos:pos+n], &prm.Time
	t.Neg = b[0] == 1
	t.Day = int(min(binary.LittleEndian.Uint32(b[1:]), 1<<20))
	t.Hour, t.Minute, t.Second = int(b[5]), int(b[6]), int(b[7])
	if n == 12 {
		t.Micro = int(binary.LittleEndian.Uint32(b[8:]))
	}
	return prm, pos + n, nil
}

// binaryValue decodes one binary-protocol value of type t at p[pos:].
func binaryValue(p []byte, pos int, t byte, unsigned bool) (any, int, error) {
	need := func(k int) error {
		if pos+k > len(p) {
			return errShortPacket
		}
		return nil
	}
	switch t {
	case mysql.MYSQL_TYPE_NULL:
		return nil, pos, nil
	case mysql.MYSQL_TYPE_TINY:
		if err := need(1); err != nil {
			return nil, pos, err
		}
		if unsigned {
			return uint64(p[pos]), pos + 1, nil
		}
		return int64(int8(p[pos])), pos + 1, nil
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		if err := need(2); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint16(p[pos:])
		if unsigned {
			return uint64(v), pos + 2, nil
		}
		return int64(int16(v)), pos + 2, nil
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
		if err := need(4); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint32(p[pos:])
		if unsigned {
			return uint64(v), pos + 4, nil
		}
		return int64(int32(v)), pos + 4, nil
	case mysql.MYSQL_TYPE_LONGLONG:
		if err := need(8); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint64(p[pos:])
		if unsigned {
			return v, pos + 8, nil
		}
		return int64(v), pos + 8, nil
	case mysql.MYSQL_TYPE_FLOAT:
		if err := need(4); err != nil {
			return nil, pos, err
		}
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(p[pos:]))), pos + 4, nil
	case mysql.MYSQL_TYPE_DOUBLE:
		if err := need(8); err != nil {
			return nil, pos, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(p[pos:])), pos + 8, nil
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP:
		return binaryDateTime(p, pos)
	case mysql.MYSQL_TYPE_TIME:
		return binaryTime(p, pos)
	default:
		s, next, err := readLenEncString(p, pos)
		if err != nil {
			return nil, pos, err
		}
		return append([]byte(nil), s...), next, nil
	}
}

// binaryDateTime decodes a DATE/DATETIME/TIMESTAMP value into MySQL's text form.
func binaryDateTime(p []byte, pos int) (any, int, error) {
	if pos >= len(p) {
		return nil, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 4 && n != 7 && n != 11) {
		return nil, pos, errShortPacket
	}
	b := p[pos : pos+n]
	var y, mo, d, h, mi, s, us int
	if n >= 4 {
		y, mo, d = int(binary.LittleEndian.Uint16(b)), int(b[2]), int(b[3])
	}
	if n >= 7 {
		h, mi, s = int(b[4]), int(b[5]), int(b[6])
	}
	if n == 11 {
		us = int(binary.LittleEndian.Uint32(b[7:]))
	}
	text := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, mo, d, h, mi, s)
	if us != 0 {
		text += fmt.Sprintf(".%06d", us)
	}
	return []byte(text), pos + n, nil
}

// binaryTime decodes a TIME value into MySQL's text form.
func binaryTime(p []byte, pos int) (any, int, error) {
	if pos >= len(p) {
		return nil, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 8 && n != 12) {
		return nil, pos, errShortPacket
	}
	if n == 0 {
		return []byte("00:00:00"), pos, nil
	}
	b := p[pos : pos+n]
	sign := ""
	if b[0] == 1 {
		sign = "-"
	}
	days := int(binary.LittleEndian.Uint32(b[1:]))
	text := fmt.Sprintf("%s%02d:%02d:%02d", sign, days*24+int(b[5]), b[6], b[7])
	if n == 12 {
		if us := binary.LittleEndian.Uint32(b[8:]); us != 0 {
			text += fmt.Sprintf(".%06d", us)
		}
	}
	return []byte(text), pos + n, nil
}
