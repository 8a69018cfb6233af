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
// time.Time its DATETIME text. Other types are an error.
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
