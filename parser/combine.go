package parser

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Reasons CombineUpdate gives when an UPDATE is not combinable. Short,
// stable, fit for explain.
const (
	CombineNotUpdate   = "not a single-table UPDATE"
	CombineModifiers   = "IGNORE, ORDER BY, LIMIT, a CTE or a hint"
	CombineAssignments = "not exactly one assignment, column = column ± value"
	CombineNotInteger  = "a value that is not an integer literal or parameter"
	CombineCondition   = "a condition other than the key and one floor on the column"
	CombineKey         = "the WHERE does not name the row by its whole key"
	CombineWrapped     = "run by SET STATEMENT"
)

// Combinable is a single-row relative UPDATE of one column, as hot-row
// combining runs it: what it adds to the column, the floor the column's
// value must reach for it to match, and the two statements a batch of
// such UPDATEs of one row runs (the row's locking read and the UPDATE of
// the net change), built from this statement's own table and key.
type Combinable struct {
	// Delta is what the UPDATE adds to the column (negative: subtracts).
	Delta int64
	// HasFloor: the UPDATE matches only when the column's value before
	// it is at least Floor (its `col >= v`, `col - v >= m`, `col > v`
	// normalised for an integer column).
	HasFloor bool
	Floor    int64
	// Select is `SELECT col FROM <table> WHERE <key> FOR UPDATE`.
	Select string

	u    *ast.UpdateStmt
	col  *ast.ColumnName
	keys ast.ExprNode
	mode Mode
}

// Update is `UPDATE <table> SET col = col + net WHERE <key>`. Not safe
// for concurrent use on one Combinable.
func (c *Combinable) Update(net int64) (string, error) {
	op, d := opcode.Plus, new(big.Rat).SetInt64(net)
	if net < 0 {
		op, d = opcode.Minus, d.Neg(d)
	}
	colExpr := func() ast.ExprNode { cn := *c.col; return &ast.ColumnNameExpr{Name: &cn} }
	cn := *c.col
	c.u.List = []*ast.Assignment{{Column: &cn, Expr: binary(op, colExpr(), number(d))}}
	c.u.Where = c.keys
	return RestoreMode(c.u, c.mode)
}

// CombineUpdate reports whether f (an UPDATE, params the values of the
// text's placeholders) is combinable for column under the key columns
// key: a single-table UPDATE without IGNORE, ORDER BY, LIMIT, CTE or
// hints, whose one assignment is `column = column ± v` and whose WHERE
// is the AND of `k = value` for each key column, once each, and at most
// one floor on column (`column >= v`, `column > v`, `column ± v >= m`,
// `column ± v > m`), every v and m an integer literal or parameter. The
// floor is normalised for an integer column; the caller checks that the
// column is one. A reason says why not; err is an internal failure.
// Safe for concurrent use (f is not modified).
func CombineUpdate(f *Facts, column string, key []string, params []any) (c *Combinable, reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, reason, err = nil, "", fmt.Errorf("%w: combine panicked: %v", ErrInternal, r)
		}
	}()
	if f == nil || f.Kind != KindUpdate {
		return nil, CombineNotUpdate, nil
	}
	if f.Wrapped {
		return nil, CombineWrapped, nil
	}
	u0, isU := f.Node.(*ast.UpdateStmt)
	if !isU || u0.MultipleTable || u0.TableRefs == nil || u0.TableRefs.TableRefs == nil || u0.TableRefs.TableRefs.Right != nil {
		return nil, CombineNotUpdate, nil
	}
	ts, isTS := u0.TableRefs.TableRefs.Left.(*ast.TableSource)
	if !isTS {
		return nil, CombineNotUpdate, nil
	}
	tn, isTN := ts.Source.(*ast.TableName)
	if !isTN || len(tn.IndexHints) > 0 || len(tn.PartitionNames) > 0 {
		return nil, CombineNotUpdate, nil
	}
	if u0.IgnoreErr || u0.Order != nil || u0.Limit != nil || u0.With != nil || len(u0.TableHints) > 0 || len(u0.List) != 1 {
		if len(u0.List) != 1 {
			return nil, CombineAssignments, nil
		}
		return nil, CombineModifiers, nil
	}
	if f.ParamBase < 0 || len(params) < f.ParamBase+f.Params {
		return nil, "", fmt.Errorf("%w: %d given, the statement needs %d", ErrRewriteParams, len(params), f.ParamBase+f.Params)
	}
	u, reason, err := private(f, params[f.ParamBase:f.ParamBase+f.Params], false)
	if reason != "" || err != nil {
		return nil, CombineNotInteger, err
	}
	names := tableNames{table: tn.Name.L, alias: ts.AsName.L, schema: tn.Schema.L}
	c = &Combinable{u: u, mode: f.Mode}
	if reason := c.assignment(u.List[0], column, names); reason != "" {
		return nil, reason, nil
	}
	if reason := c.where(u.Where, key, names); reason != "" {
		return nil, reason, nil
	}
	colExpr := &ast.ColumnNameExpr{Name: c.col}
	sel := &ast.SelectStmt{
		Kind:           ast.SelectStmtKindSelect,
		SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true},
		Fields:         &ast.FieldList{Fields: []*ast.SelectField{{Expr: colExpr}}},
		From:           u.TableRefs,
		Where:          c.keys,
		LockInfo:       &ast.SelectLockInfo{LockType: ast.SelectLockForUpdate},
	}
	if c.Select, err = RestoreMode(sel, f.Mode); err != nil {
		return nil, "", fmt.Errorf("%w: restore combined read: %v", ErrInternal, err)
	}
	return c, "", nil
}

// tableNames are the names a column of the UPDATE's table may be
// qualified with.
type tableNames struct{ table, alias, schema string }

// column reports whether e names the column col of the table.
func (n tableNames) column(e ast.ExprNode, col string) bool {
	ce, ok := unparen(e).(*ast.ColumnNameExpr)
	if !ok || ce.Name.Name.L != col {
		return false
	}
	q := ce.Name.Table.L
	if q != "" && q != n.alias && (n.alias != "" || q != n.table) {
		return false
	}
	return ce.Name.Schema.L == "" || n.alias == "" && ce.Name.Schema.L == n.schema
}

// assignment checks `col = col ± v` and records col and Delta.
func (c *Combinable) assignment(as *ast.Assignment, column string, n tableNames) string {
	col := strings.ToLower(column)
	if as.Column == nil || as.Column.Name.L != col || !n.column(&ast.ColumnNameExpr{Name: as.Column}, col) {
		return CombineAssignments
	}
	bin, ok := unparen(as.Expr).(*ast.BinaryOperationExpr)
	if !ok || bin.Op != opcode.Plus && bin.Op != opcode.Minus {
		return CombineAssignments
	}
	var v *big.Int
	switch {
	case n.column(bin.L, col):
		if v, ok = integer(bin.R); !ok {
			return CombineNotInteger
		}
		if bin.Op == opcode.Minus {
			v.Neg(v)
		}
	case bin.Op == opcode.Plus && n.column(bin.R, col):
		if v, ok = integer(bin.L); !ok {
			return CombineNotInteger
		}
	default:
		return CombineAssignments
	}
	if !v.IsInt64() {
		return CombineNotInteger
	}
	cn := *as.Column
	c.col, c.Delta = &cn, v.Int64()
	return ""
}

// where checks that w is the key's equalities and at most one floor, and
// keeps the key's part.
func (c *Combinable) where(w ast.ExprNode, key []string, n tableNames) string {
	var conj []ast.ExprNode
	flattenAnd(w, &conj)
	seen := map[string]bool{}
	var keys []ast.ExprNode
	for _, e := range conj {
		if k, ok := keyEquality(e, key, n); ok {
			if seen[k] {
				return CombineKey
			}
			seen[k] = true
			keys = append(keys, e)
			continue
		}
		if c.HasFloor {
			return CombineCondition
		}
		floor, reason := floorOf(e, c.col.Name.L, n)
		if reason != "" {
			return reason
		}
		c.HasFloor, c.Floor = true, floor
	}
	if len(seen) != len(key) {
		return CombineKey
	}
	c.keys = keys[0]
	for _, k := range keys[1:] {
		c.keys = binary(opcode.LogicAnd, c.keys, k)
	}
	return ""
}

func flattenAnd(e ast.ExprNode, out *[]ast.ExprNode) {
	if e == nil {
		return
	}
	e = unparen(e)
	if b, ok := e.(*ast.BinaryOperationExpr); ok && b.Op == opcode.LogicAnd {
		flattenAnd(b.L, out)
		flattenAnd(b.R, out)
		return
	}
	*out = append(*out, e)
}

// keyEquality recognises `k = value` (either side) for a key column k.
func keyEquality(e ast.ExprNode, key []string, n tableNames) (string, bool) {
	b, ok := e.(*ast.BinaryOperationExpr)
	if !ok || b.Op != opcode.EQ {
		return "", false
	}
	for _, k := range key {
		k = strings.ToLower(k)
		switch {
		case n.column(b.L, k) && constant(b.R), n.column(b.R, k) && constant(b.L):
			return k, true
		}
	}
	return "", false
}

// constant reports whether e is a literal (placeholders are substituted).
func constant(e ast.ExprNode) bool {
	switch x := unparen(e).(type) {
	case *test_driver.ValueExpr:
		return true
	case *ast.UnaryOperationExpr:
		_, ok := unparen(x.V).(*test_driver.ValueExpr)
		return ok && (x.Op == opcode.Minus || x.Op == opcode.Plus)
	}
	return false
}

// floorOf reads `col [± v] >= m` or `> m` (also written `m <= col ...`)
// as the least integer value of col that satisfies it.
func floorOf(e ast.ExprNode, col string, n tableNames) (int64, string) {
	b, ok := e.(*ast.BinaryOperationExpr)
	if !ok {
		return 0, CombineCondition
	}
	l, r, op := b.L, b.R, b.Op
	switch op {
	case opcode.LE:
		l, r, op = r, l, opcode.GE
	case opcode.LT:
		l, r, op = r, l, opcode.GT
	case opcode.GE, opcode.GT:
	default:
		return 0, CombineCondition
	}
	m, isInt := integer(r)
	if !isInt {
		if constant(r) {
			return 0, CombineNotInteger
		}
		return 0, CombineCondition
	}
	l = unparen(l)
	if lb, isBin := l.(*ast.BinaryOperationExpr); isBin && (lb.Op == opcode.Plus || lb.Op == opcode.Minus) && n.column(lb.L, col) {
		v, isInt := integer(lb.R)
		if !isInt {
			return 0, CombineNotInteger
		}
		if lb.Op == opcode.Plus {
			m.Sub(m, v)
		} else {
			m.Add(m, v)
		}
	} else if !n.column(l, col) {
		return 0, CombineCondition
	}
	if op == opcode.GT {
		m.Add(m, big.NewInt(1))
	}
	if !m.IsInt64() || m.Int64() == math.MinInt64 {
		return 0, CombineNotInteger
	}
	return m.Int64(), ""
}

// integer is the value of an integer literal (or a negated one).
func integer(e ast.ExprNode) (*big.Int, bool) {
	neg := false
	e = unparen(e)
	if u, ok := e.(*ast.UnaryOperationExpr); ok && (u.Op == opcode.Minus || u.Op == opcode.Plus) {
		neg, e = u.Op == opcode.Minus, unparen(u.V)
	}
	x, ok := e.(*test_driver.ValueExpr)
	if !ok {
		return nil, false
	}
	v, ok := literal(x)
	if !ok {
		return nil, false
	}
	var r *big.Int
	switch v.Kind {
	case ValueInt:
		r = big.NewInt(v.Int)
	case ValueUint:
		r = new(big.Int).SetUint64(v.Uint)
	default:
		return nil, false
	}
	if neg {
		r.Neg(r)
	}
	return r, true
}
