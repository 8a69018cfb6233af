package rules

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lockproxy/lockproxy/parser"
)

// ParamValue converts an execute-time parameter, as the MySQL binary
// protocol decodes it, into a parser.Value for Normalize: nil is NULL,
// integers are ValueInt/ValueUint, floats ValueFloat, []byte and string
// ValueString (the protocol sends strings and decimals as bytes), bool 1/0,
// time.Time its DATETIME text, a Param the literal of the same meaning (a
// temporal Param has none: use NormalizeParam). Other types are an error.
func ParamValue(p any) (parser.Value, error) {
	switch v := p.(type) {
	case parser.Value:
		// A value lockproxy already knows as SQL (a user variable set
		// from a literal, bound through EXECUTE ... USING).
		if v.Kind == parser.ValueExpr || v.Kind == parser.ValueParam {
			return parser.Value{}, fmt.Errorf("parameter value is not known to lockproxy")
		}
		return v, nil
	case nil:
		return parser.Value{Kind: parser.ValueNull, Text: "NULL"}, nil
	case int:
		return intValue(int64(v)), nil
	case int8:
		return intValue(int64(v)), nil
	case int16:
		return intValue(int64(v)), nil
	case int32:
		return intValue(int64(v)), nil
	case int64:
		return intValue(v), nil
	case uint:
		return uintValue(uint64(v)), nil
	case uint8:
		return uintValue(uint64(v)), nil
	case uint16:
		return uintValue(uint64(v)), nil
	case uint32:
		return uintValue(uint64(v)), nil
	case uint64:
		return uintValue(v), nil
	case float32:
		return floatValue(float64(v)), nil
	case float64:
		return floatValue(v), nil
	case bool:
		if v {
			return intValue(1), nil
		}
		return intValue(0), nil
	case []byte:
		return parser.Value{Kind: parser.ValueString, Str: string(v), Text: strconv.Quote(string(v))}, nil
	case string:
		return parser.Value{Kind: parser.ValueString, Str: v, Text: strconv.Quote(v)}, nil
	case Param:
		return v.value()
	case time.Time:
		s := v.Format("2006-01-02 15:04:05.999999")
		return parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}, nil
	}
	return parser.Value{}, fmt.Errorf("parameter of type %T cannot name a row", p)
}

func intValue(i int64) parser.Value {
	return parser.Value{Kind: parser.ValueInt, Int: i, Text: strconv.FormatInt(i, 10)}
}

func uintValue(u uint64) parser.Value {
	if u <= math.MaxInt64 {
		return intValue(int64(u))
	}
	return parser.Value{Kind: parser.ValueUint, Uint: u, Text: strconv.FormatUint(u, 10)}
}

func floatValue(f float64) parser.Value {
	return parser.Value{Kind: parser.ValueFloat, Float: f, Text: strconv.FormatFloat(f, 'g', -1, 64)}
}

// ParamType says how MariaDB reads a COM_STMT_EXECUTE parameter, which
// decides what it compares with a key column. It groups the binary
// protocol's type codes by what the server does with them.
type ParamType uint8

// Parameter types.
const (
	// ParamOther is a type code lockproxy does not know how MariaDB reads;
	// such a parameter never names a row.
	ParamOther ParamType = iota
	// ParamNull is NULL (the null bitmap, or type NULL).
	ParamNull
	// ParamInt is TINY, SHORT, LONG or LONGLONG without the unsigned flag: Int.
	ParamInt
	// ParamUint is one of those with the unsigned flag: Uint.
	ParamUint
	// ParamDouble is DOUBLE, or FLOAT widened to a double as MariaDB does: Float.
	ParamDouble
	// ParamDecimal is DECIMAL or NEWDECIMAL, sent as text: Bytes.
	ParamDecimal
	// ParamString is a character string in the client's character set
	// (VARCHAR, VAR_STRING, STRING, ENUM, SET ...): Bytes.
	ParamString
	// ParamBlob is TINY_BLOB, BLOB, MEDIUM_BLOB or LONG_BLOB, which
	// MariaDB reads as a binary string: Bytes.
	ParamBlob
	// ParamDate is DATE: Time (year, month, day).
	ParamDate
	// ParamDateTime is DATETIME or TIMESTAMP: Time.
	ParamDateTime
	// ParamTime is TIME: Time (sign, hours counting days, minutes,
	// seconds, microseconds).
	ParamTime
)

// Param is one execute-time parameter as the client typed it on the wire.
// Wire is the protocol type code (for messages); the field that holds the
// value depends on Type.
type Param struct {
	Type  ParamType
	Wire  byte
	Int   int64
	Uint  uint64
	Float float64
	Bytes []byte
	Time  Temporal
}

// Temporal is a DATE, DATETIME, TIMESTAMP or TIME parameter as the binary
// protocol carries it, fields as sent (not range-checked). A TIME has Neg,
// Day (its days), Hour, Minute, Second and Micro; a DATE has no clock.
type Temporal struct {
	Neg                  bool
	Year, Month, Day     int
	Hour, Minute, Second int
	Micro                int
}

// String shows the parameter for messages: its type and value.
func (p Param) String() string {
	switch p.Type {
	case ParamNull:
		return "NULL"
	case ParamInt:
		return "integer " + strconv.FormatInt(p.Int, 10)
	case ParamUint:
		return "unsigned integer " + strconv.FormatUint(p.Uint, 10)
	case ParamDouble:
		return "double " + strconv.FormatFloat(p.Float, 'g', -1, 64)
	case ParamDecimal:
		return "decimal " + strconv.Quote(string(p.Bytes))
	case ParamString:
		return "string " + strconv.Quote(string(p.Bytes))
	case ParamBlob:
		return "blob " + strconv.Quote(string(p.Bytes))
	case ParamDate:
		return "DATE " + p.Time.dateText()
	case ParamDateTime:
		return "DATETIME " + p.Time.dateText() + " " + p.Time.clockText(false)
	case ParamTime:
		return "TIME " + p.Time.clockText(true)
	}
	return fmt.Sprintf("protocol type %d", p.Wire)
}

func (t Temporal) dateText() string {
	return fmt.Sprintf("%04d-%02d-%02d", t.Year, t.Month, t.Day)
}

// clockText is hh:mm:ss[.ffffff]; for a TIME (days) the days count as
// hours and the sign shows.
func (t Temporal) clockText(days bool) string {
	h := t.Hour
	if days {
		h += 24 * t.Day
	}
	s := fmt.Sprintf("%02d:%02d:%02d", h, t.Minute, t.Second)
	if t.Micro != 0 {
		s += fmt.Sprintf(".%06d", t.Micro)
	}
	if days && t.Neg {
		s = "-" + s
	}
	return s
}

// Plain is the parameter as a plain Go value (nil, int64, uint64,
// float64 or []byte) for code that renders parameters into statement
// text, when that text means what the typed parameter means. A temporal
// or unknown parameter has no such value (its text form would compare as
// a string): ok is false.
func (p Param) Plain() (v any, ok bool) {
	switch p.Type {
	case ParamNull:
		return nil, true
	case ParamInt:
		return p.Int, true
	case ParamUint:
		return p.Uint, true
	case ParamDouble:
		return p.Float, true
	case ParamDecimal, ParamString, ParamBlob:
		return p.Bytes, true
	}
	return nil, false
}

// value is the parameter as a literal of the same meaning, for the types
// that have one.
func (p Param) value() (parser.Value, error) {
	switch p.Type {
	case ParamNull:
		return parser.Value{Kind: parser.ValueNull, Text: "NULL"}, nil
	case ParamInt:
		return intValue(p.Int), nil
	case ParamUint:
		return uintValue(p.Uint), nil
	case ParamDouble:
		return floatValue(p.Float), nil
	case ParamDecimal:
		return parser.Value{Kind: parser.ValueDecimal, Str: string(p.Bytes), Text: string(p.Bytes)}, nil
	case ParamString:
		return parser.Value{Kind: parser.ValueString, Str: string(p.Bytes), Text: strconv.Quote(string(p.Bytes))}, nil
	case ParamBlob:
		// MariaDB reads a BLOB parameter as a binary string, which meets a
		// text column as bytes of the column's character set.
		return parser.Value{Kind: parser.ValueString, Str: string(p.Bytes), Charset: "binary", Text: strconv.Quote(string(p.Bytes))}, nil
	}
	return parser.Value{}, unkeyable("parameter %s has no literal of the same meaning", p)
}
