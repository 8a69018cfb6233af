package parser

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// assignment classifies one `column = expr`.
func (an *analyzer) assignment(as *ast.Assignment) Assignment {
	out := Assignment{}
	if as.Column != nil {
		out.Table = as.Column.Table.L
		out.Column = as.Column.Name.L
	}
	if as.Expr == nil {
		return out
	}
	if v, ok := an.constValue(as.Expr); ok {
		out.Value = v
		out.Kind = AssignLiteral
		if v.Kind == ValueParam {
			out.Kind = AssignParam
		}
		return out
	}
	if op, delta, ok := an.relative(as.Column, unparen(as.Expr)); ok {
		out.Kind, out.Op, out.Delta = AssignRelative, op, delta
		return out
	}
	out.Value = an.exprValue(as.Expr)
	return out
}

// relative recognises `col + delta`, `col - delta` and `delta + col` where
// col is the assigned column and delta a literal or placeholder.
func (an *analyzer) relative(col *ast.ColumnName, e ast.ExprNode) (byte, Value, bool) {
	bin, ok := e.(*ast.BinaryOperationExpr)
	if !ok || col == nil || (bin.Op != opcode.Plus && bin.Op != opcode.Minus) {
		return 0, Value{}, false
	}
	op := byte('+')
	if bin.Op == opcode.Minus {
		op = '-'
	}
	if sameColumn(col, unparen(bin.L)) {
		if v, ok := an.constValue(bin.R); ok {
			return op, v, true
		}
	}
	if op == '+' && sameColumn(col, unparen(bin.R)) {
		if v, ok := an.constValue(bin.L); ok {
			return op, v, true
		}
	}
	return 0, Value{}, false
}

// sameColumn reports whether e names the column c (a missing qualifier on
// either side matches).
func sameColumn(c *ast.ColumnName, e ast.ExprNode) bool {
	ce, ok := e.(*ast.ColumnNameExpr)
	if !ok || ce.Name.Name.L != c.Name.L {
		return false
	}
	return ce.Name.Table.L == "" || c.Table.L == "" || ce.Name.Table.L == c.Table.L
}

// insert records INSERT/REPLACE: the target table with a predicate built
// from the VALUES rows, the rows themselves and ON DUPLICATE KEY UPDATE.
func (an *analyzer) insert(s *ast.InsertStmt) {
	ins := &InsertFacts{Ignore: s.IgnoreErr}
	an.f.Insert = ins
	for _, c := range s.Columns {
		ins.Columns = append(ins.Columns, c.Name.L)
	}
	ins.FromSelect = s.Select != nil
	if !ins.FromSelect {
		ins.Rows = make([][]Value, 0, len(s.Lists))
		for _, list := range s.Lists {
			row := make([]Value, len(list))
			for i, e := range list {
				row[i] = an.exprValue(e)
			}
			ins.Rows = append(ins.Rows, row)
		}
	}
	for _, as := range s.OnDuplicate {
		ins.OnDuplicate = append(ins.OnDuplicate, an.assignment(as))
	}
	if s.Table == nil || s.Table.TableRefs == nil {
		return
	}
	src, ok := s.Table.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return
	}
	if tn, ok := src.Source.(*ast.TableName); ok {
		an.addTable(tn, src.AsName.L, true, RowsPredicate(ins))
	}
}

// RowsPredicate describes the rows an INSERT writes: one conjunction per
// VALUES row of its literal and placeholder columns. It grows linearly with
// the text, so MaxAtoms does not apply. A caller that learns the columns of
// an INSERT without a column list (the table's own order) sets
// ins.Columns and asks again.
func RowsPredicate(ins *InsertFacts) *Predicate {
	if ins.FromSelect || len(ins.Columns) == 0 || len(ins.Rows) == 0 {
		return &Predicate{Unkeyed: true, Residual: true}
	}
	p := &Predicate{Or: make([]Conj, 0, len(ins.Rows))}
	for _, row := range ins.Rows {
		if len(row) != len(ins.Columns) {
			return &Predicate{Unkeyed: true, Residual: true}
		}
		c := make(Conj, 0, len(row))
		for i, v := range row {
			if !v.IsConst() || ins.Columns[i] == "" { // `` parses, MySQL rejects it
				p.Residual = true
				continue
			}
			c = append(c, Atom{Column: ins.Columns[i], Value: v})
		}
		p.Or = append(p.Or, c)
	}
	return p
}
