package parser

import (
	"math"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// constValue returns e as a literal or placeholder Value; ok is false for
// any other expression.
func (an *analyzer) constValue(e ast.ExprNode) (Value, bool) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return an.constValue(x.Expr)
	case *test_driver.ParamMarkerExpr:
		return Value{Kind: ValueParam, Param: an.params[x], Text: "?"}, true
	case *test_driver.ValueExpr:
		return literal(x)
	case *ast.UnaryOperationExpr:
		v, ok := an.constValue(x.V)
		if !ok {
			return Value{}, false
		}
		switch x.Op {
		case opcode.Plus:
			return v, isNumeric(v.Kind)
		case opcode.Minus:
			return negate(v)
		}
	}
	return Value{}, false
}

// exprValue is constValue, or a ValueExpr carrying e's SQL text.
func (an *analyzer) exprValue(e ast.ExprNode) Value {
	if v, ok := an.constValue(e); ok {
		return v
	}
	text, err := Restore(e)
	if err != nil {
		text = ""
	}
	return Value{Kind: ValueExpr, Text: text}
}

func isNumeric(k ValueKind) bool {
	return k == ValueInt || k == ValueUint || k == ValueDecimal || k == ValueFloat
}

// literal converts a parsed literal.
func literal(x *test_driver.ValueExpr) (Value, bool) {
	switch x.Kind() {
	case test_driver.KindNull:
		return Value{Kind: ValueNull, Text: "NULL"}, true
	case test_driver.KindInt64:
		i := x.GetInt64()
		return Value{Kind: ValueInt, Int: i, Text: strconv.FormatInt(i, 10)}, true
	case test_driver.KindUint64:
		u := x.GetUint64()
		return Value{Kind: ValueUint, Uint: u, Text: strconv.FormatUint(u, 10)}, true
	case test_driver.KindFloat32, test_driver.KindFloat64:
		f := x.GetFloat64()
		return Value{Kind: ValueFloat, Float: f, Text: strconv.FormatFloat(f, 'e', -1, 64)}, true
	case test_driver.KindMysqlDecimal:
		s := x.GetMysqlDecimal().String()
		return Value{Kind: ValueDecimal, Str: s, Text: s}, true
	case test_driver.KindString, test_driver.KindBytes:
		v := Value{Kind: ValueString, Str: x.GetString()}
		if x.Type.GetFlag()&mysql.UnderScoreCharsetFlag != 0 {
			v.Charset = strings.ToLower(x.Type.GetCharset())
		}
		v.Text = quoteString(v.Str)
		if v.Charset != "" {
			v.Text = "_" + v.Charset + v.Text
		}
		return v, true
	case test_driver.KindBinaryLiteral:
		b := x.GetBytes()
		if x.Type.GetFlag()&mysql.UnsignedFlag != 0 {
			return Value{Kind: ValueHex, Str: string(b), Text: "x'" + hexString(b) + "'"}, true
		}
		return Value{Kind: ValueBit, Str: string(b), Text: x.GetBinaryLiteral().ToBitLiteralString(true)}, true
	}
	return Value{}, false
}

// negate applies unary minus to a numeric literal.
func negate(v Value) (Value, bool) {
	switch v.Kind {
	case ValueInt:
		if v.Int == math.MinInt64 {
			return Value{}, false
		}
		v.Int = -v.Int
		v.Text = strconv.FormatInt(v.Int, 10)
		return v, true
	case ValueUint:
		if v.Uint == 1<<63 {
			return Value{Kind: ValueInt, Int: math.MinInt64, Text: strconv.FormatInt(math.MinInt64, 10)}, true
		}
		// Beyond int64: MySQL makes it a DECIMAL.
		s := "-" + strconv.FormatUint(v.Uint, 10)
		return Value{Kind: ValueDecimal, Str: s, Text: s}, true
	case ValueDecimal:
		if strings.HasPrefix(v.Str, "-") {
			v.Str = v.Str[1:]
		} else {
			v.Str = "-" + v.Str
		}
		v.Text = v.Str
		return v, true
	case ValueFloat:
		v.Float = -v.Float
		v.Text = strconv.FormatFloat(v.Float, 'e', -1, 64)
		return v, true
	}
	return Value{}, false
}

// quoteString renders s as a single-quoted MySQL string literal that reads
// back as the same bytes under the default SQL mode (backslash escapes on).
func quoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		case 0:
			b.WriteString(`\0`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0x1a:
			b.WriteString(`\Z`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i] = digits[c>>4]
		out[2*i+1] = digits[c&0xf]
	}
	return string(out)
}
