package parser

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// number is r (within inRange) as a DECIMAL literal.
func number(r *big.Rat) ast.ExprNode {
	s, _ := decimalText(r)
	d := new(test_driver.MyDecimal)
	if err := d.FromString([]byte(s)); err != nil || d.String() != s {
		panic(fmt.Sprintf("decimal %s does not survive MyDecimal (%v)", s, err))
	}
	return ast.NewValueExpr(d, "", "")
}

// inRange is ReasonOutOfRange when r is no exact DECIMAL(65,30) literal.
func inRange(r *big.Rat) string {
	if _, ok := decimalText(r); !ok {
		return ReasonOutOfRange
	}
	return ""
}

// decimalText renders r exactly with the fewest fraction digits; ok is
// false beyond maxScale fraction digits or maxDigits digits.
func decimalText(r *big.Rat) (string, bool) {
	scale, pow, rem := 0, big.NewInt(1), new(big.Int)
	for rem.Mod(pow, r.Denom()).Sign() != 0 {
		if scale++; scale > maxScale {
			return "", false
		}
		pow.Mul(pow, big.NewInt(10))
	}
	s := r.FloatString(scale)
	digits := strings.Count(s, "") - 1 - strings.Count(s, "-") - strings.Count(s, ".")
	return s, digits <= maxDigits
}

// parseNumber reads MySQL's numeric text ([+-]digits[.digits][e[+-]digits],
// also ".5" and "5.") exactly; anything else (blanks, hex, NaN) is not a
// number. Length and exponent are bounded so no input makes it costly.
func parseNumber(s string) (*big.Rat, bool) {
	i, digits := 0, 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 || digits > 200 {
		return nil, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		start := j
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9' && j-start < 4; j++ {
		}
		if j == start {
			return nil, false
		}
		i = j
	}
	if i != len(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// numberOf is the exact number a literal or placeholder Value stands for;
// a reason when it is none.
func numberOf(v Value, params []any) (*big.Rat, string, error) {
	var r *big.Rat
	ok := false
	switch v.Kind {
	case ValueParam:
		if v.Param < 0 || v.Param >= len(params) {
			return nil, "", fmt.Errorf("%w: no value for placeholder %d", ErrRewriteParams, v.Param)
		}
		return paramNumber(params[v.Param])
	case ValueInt:
		r, ok = new(big.Rat).SetInt64(v.Int), true
	case ValueUint:
		r, ok = new(big.Rat).SetInt(new(big.Int).SetUint64(v.Uint)), true
	case ValueDecimal, ValueString:
		r, ok = parseNumber(v.Str)
	case ValueFloat:
		r, ok = parseNumber(strconv.FormatFloat(v.Float, 'g', -1, 64))
	}
	if !ok {
		return nil, ReasonNonNumeric, nil
	}
	return r, "", nil
}

// paramNumber is numberOf for a parameter value.
func paramNumber(x any) (*big.Rat, string, error) {
	x, err := normalParam(x)
	if err != nil {
		return nil, "", err
	}
	var r *big.Rat
	ok := false
	switch v := x.(type) {
	case int64:
		r, ok = new(big.Rat).SetInt64(v), true
	case uint64:
		r, ok = new(big.Rat).SetInt(new(big.Int).SetUint64(v)), true
	case float64:
		r, ok = parseNumber(strconv.FormatFloat(v, 'g', -1, 64))
	case []byte:
		r, ok = parseNumber(string(v))
	case string:
		r, ok = parseNumber(v)
	}
	if !ok {
		return nil, ReasonNonNumeric, nil
	}
	return r, "", nil
}

// normalParam maps a binary-protocol value to nil, int64, uint64,
// float64, []byte or string.
func normalParam(x any) (any, error) {
	switch v := x.(type) {
	case nil, int64, uint64, float64, []byte, string:
		return v, nil
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint:
		return uint64(v), nil
	case uint8:
		return uint64(v), nil
	case uint16:
		return uint64(v), nil
	case uint32:
		return uint64(v), nil
	case float32:
		return float64(v), nil
	}
	return nil, fmt.Errorf("%w: unsupported value type %T", ErrRewriteParams, x)
}

// paramExpr is the literal that stands for a parameter value in text; a
// negative number is parenthesised so no `--` ever appears.
func paramExpr(x any) (ast.ExprNode, string, error) {
	x, err := normalParam(x)
	if err != nil {
		return nil, "", err
	}
	neg := false
	switch v := x.(type) {
	case int64:
		neg = v < 0
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, ReasonNonFinite, nil
		}
		neg = math.Signbit(v)
	}
	var e ast.ExprNode = ast.NewValueExpr(x, "", "")
	if neg {
		e = &ast.ParenthesesExpr{Expr: e}
	}
	return e, "", nil
}

// limitExpr is the literal for a LIMIT placeholder: a non-negative integer.
func limitExpr(x any) (ast.ExprNode, bool) {
	x, err := normalParam(x)
	if err != nil {
		return nil, false
	}
	var u uint64
	switch v := x.(type) {
	case int64:
		if v < 0 {
			return nil, false
		}
		u = uint64(v)
	case uint64:
		u = v
	case []byte, string:
		n, err := strconv.ParseUint(paramString(v), 10, 64)
		if err != nil {
			return nil, false
		}
		u = n
	default:
		return nil, false
	}
	return ast.NewValueExpr(u, "", ""), true
}

func paramString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v.(string)
}

// substitute replaces every placeholder of the fresh UPDATE u by the
// literal of its value (own[i] for its i-th placeholder in text order).
func substitute(u *ast.UpdateStmt, own []any) (string, error) {
	var c paramCollector
	u.Accept(&c)
	if len(c.marks) != len(own) {
		return "", fmt.Errorf("%w: %d placeholders on a fresh parse, %d in the facts", ErrInternal, len(c.marks), len(own))
	}
	if len(own) == 0 {
		return "", nil
	}
	sort.SliceStable(c.marks, func(i, j int) bool { return c.marks[i].Offset < c.marks[j].Offset })
	repl := make(paramReplacer, len(own))
	for i, m := range c.marks {
		e, reason, err := paramExpr(own[i])
		if reason != "" || err != nil {
			return reason, err
		}
		repl[m] = e
	}
	if u.Order != nil {
		for _, item := range u.Order.Items {
			if _, isMark := unparen(item.Expr).(*test_driver.ParamMarkerExpr); isMark {
				return ReasonParamPosition, nil // ORDER BY 1 would mean the first column
			}
		}
	}
	if u.Limit != nil {
		for _, e := range []ast.ExprNode{u.Limit.Count, u.Limit.Offset} {
			if m, isMark := e.(*test_driver.ParamMarkerExpr); isMark {
				le, ok := limitExpr(own[indexOf(c.marks, m)])
				if !ok {
					return ReasonParamPosition, nil
				}
				repl[m] = le
			}
		}
	}
	u.Accept(repl)
	c.marks = c.marks[:0]
	if u.Accept(&c); len(c.marks) != 0 {
		return "", fmt.Errorf("%w: %d placeholders left after substitution", ErrInternal, len(c.marks))
	}
	return "", nil
}

func indexOf(marks []*test_driver.ParamMarkerExpr, m *test_driver.ParamMarkerExpr) int {
	for i, x := range marks {
		if x == m {
			return i
		}
	}
	return -1
}

// paramReplacer swaps placeholders for literals as the walk leaves them.
type paramReplacer map[*test_driver.ParamMarkerExpr]ast.ExprNode

func (r paramReplacer) Enter(n ast.Node) (ast.Node, bool) { return n, false }

func (r paramReplacer) Leave(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		if e, ok := r[m]; ok {
			return e, true
		}
	}
	return n, true
}

// oneRow reports whether the UPDATE's WHERE pins one value for each key
// column in every conjunction (one row). Placeholders compare by their
// value, literals by kind and text: two spellings of one value count as
// two rows, which only forgoes a rewrite.
func oneRow(f *Facts, key []string, params []any) bool {
	var t *TableRef
	for i := range f.Tables {
		if f.Tables[i].Write {
			if t != nil {
				return false
			}
			t = &f.Tables[i]
		}
	}
	if t == nil || t.Where == nil || t.Where.Unkeyed || len(t.Where.Or) == 0 {
		return false
	}
	for _, k := range key {
		k = strings.ToLower(k)
		seen := ""
		for _, conj := range t.Where.Or {
			found := false
			for _, a := range conj {
				if a.Column != k {
					continue
				}
				id := a.Value.Kind.String() + ":" + a.Value.Text
				if a.Value.Kind == ValueParam && a.Value.Param < len(params) {
					x := params[a.Value.Param]
					id = fmt.Sprintf("%T:%v", x, x)
				}
				if seen != "" && id != seen {
					return false
				}
				seen, found = id, true
			}
			if !found {
				return false
			}
		}
	}
	return true
}
