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
		if x.Kind() == test_driver.KindBinaryLiteral && x.Type.GetFlag()&mysql.UnsignedFlag != 0 &&
			x.Type.GetFlag()&mysql.UnderScoreCharsetFlag == 0 {
			return an.hexLiteral(x.GetBytes())
		}
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

// hexLiteral is a hex literal as MariaDB reads it: X'3E9' is a binary
// string (in a numeric context its text, '1001' is 1001), 0x3E9 a hybrid
// that is the number 1001 there. The parsed tree does not keep which was
// written, so the statement's text says: when it has only one form, every
// hex literal is of that form; when it has both, which is which is not
// known, and the value is not a constant lockproxy can key.
//
// Its text is made once, in the form it is (an inlined BLOB may be many
// MiB of it).
func (an *analyzer) hexLiteral(b []byte) (Value, bool) {
	if an.hexForms == 0 {
		an.hexForms = hexForms(an.f.Text, an.f.Mode) | hexLooked
	}
	switch an.hexForms &^ hexLooked {
	case 0, hexNumbers:
		return Value{Kind: ValueHex, Str: string(b), Text: hexText('x', b)}, true
	case hexStrings:
		return Value{Kind: ValueString, Str: string(b), Charset: "binary", Text: hexText('X', b)}, true
	}
	return Value{Kind: ValueExpr, Text: hexText('x', b)}, true
}

// Hex literal forms in a statement's text (analyzer.hexForms).
const (
	hexNumbers = 1 << iota // 0x3E9
	hexStrings             // X'3E9'
	hexLooked              // analyzer.hexForms is known
)

// hexForms reports which hex literal forms text has (outside strings and
// comments).
func hexForms(text string, m Mode) int {
	forms := 0
	l := lexer{s: text, mode: m}
	for {
		t, ok := l.next()
		if !ok {
			break
		}
		switch {
		case t.quoted || t.punct:
		case (t.text == "x" || t.text == "X") && l.i < len(text) && text[l.i] == '\'':
			forms |= hexStrings
		case len(t.text) > 2 && t.text[0] == '0' && (t.text[1] == 'x' || t.text[1] == 'X'):
			forms |= hexNumbers
		}
	}
	return forms
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
		var v Value
		if x.Type.GetFlag()&mysql.UnsignedFlag != 0 {
			v = Value{Kind: ValueHex, Str: string(b), Text: hexText('x', b)}
		} else {
			// Bit literals are short (a BIGINT's bits at most to be
			// useful); ToBitLiteralString formats each byte.
			v = Value{Kind: ValueBit, Str: string(b), Text: x.GetBinaryLiteral().ToBitLiteralString(true)}
		}
		// _latin1 X'E9' is a latin1 string, not a binary one (nor, in a
		// numeric context, a number).
		if x.Type.GetFlag()&mysql.UnderScoreCharsetFlag != 0 {
			v.Kind, v.Charset = ValueString, strings.ToLower(x.Type.GetCharset())
			v.Text = "_" + v.Charset + " " + v.Text
		}
		return v, true
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
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '\\', 0, '\n', '\r', 0x1a:
			n++
		}
	}
	var b strings.Builder
	b.Grow(n)
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

// hexText renders b as the hex literal x'..' (prefix 'x') or X'..', in
// one allocation.
func hexText(prefix byte, b []byte) string {
	const digits = "0123456789abcdef"
	var out strings.Builder
	out.Grow(2*len(b) + 3)
	out.WriteByte(prefix)
	out.WriteByte('\'')
	for _, c := range b {
		out.WriteByte(digits[c>>4])
		out.WriteByte(digits[c&0xf])
	}
	out.WriteByte('\'')
	return out.String()
}
