package parser

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// FenceUpdate makes a single-table UPDATE f conditional on a fencing token
// (DESIGN.md §3 and the fencing seeds): the returned update also sets
// column = token and changes only rows whose column is below token, so a
// write from a holder whose lease has passed to a newer holder (who wrote
// a larger token) changes nothing. check is a SELECT COUNT(*) over the
// same rows whose column is already at or past token: run after the
// update changed no row, a non-zero count tells a stale write from a
// statement that matched nothing. Placeholders are bound from params as
// literals (see RewriteUpdate). Both statements are built on a fresh parse
// of f.Text under f.Mode and restored from the AST for that mode
// (RestoreMode).
func FenceUpdate(f *Facts, column string, token uint64, params []any) (update, check string, ok bool, reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			update, check, ok, reason, err = "", "", false, "", fmt.Errorf("%w: fence panicked: %v", ErrInternal, r)
		}
	}()
	if f == nil || f.Kind != KindUpdate {
		return "", "", false, ReasonNotUpdate, nil
	}
	if f.ParamBase < 0 || len(params) < f.ParamBase+f.Params {
		return "", "", false, "", fmt.Errorf("%w: %d given, the statement needs %d", ErrRewriteParams, len(params), f.ParamBase+f.Params)
	}
	for _, a := range f.Assignments {
		if strings.EqualFold(a.Column, column) {
			return "", "", false, "assigns the fence column", nil
		}
	}
	fresh := func() (*ast.UpdateStmt, string, error) {
		stmts, err := ParseMode(f.Text, f.Mode)
		if err != nil || len(stmts) != 1 {
			return nil, "", fmt.Errorf("%w: statement does not parse again: %v", ErrInternal, err)
		}
		u, isU := stmts[0].(*ast.UpdateStmt)
		if !isU || u.MultipleTable || u.TableRefs == nil || u.TableRefs.TableRefs == nil || u.TableRefs.TableRefs.Right != nil {
			return nil, ReasonMultiTable, nil
		}
		reason, err := substitute(u, params[f.ParamBase:f.ParamBase+f.Params])
		return u, reason, err
	}
	u, reason, err := fresh()
	if u == nil || reason != "" || err != nil {
		return "", "", false, reason, err
	}
	col := func() *ast.ColumnName { return &ast.ColumnName{Name: ast.NewCIStr(column)} }
	tok := func() ast.ExprNode { return ast.NewValueExpr(token, "", "") }
	u.List = append(u.List, &ast.Assignment{Column: col(), Expr: tok()})
	u.Where = and(u.Where, binary(opcode.LT, &ast.ColumnNameExpr{Name: col()}, tok()))
	if update, err = RestoreMode(u, f.Mode); err != nil {
		return "", "", false, "", fmt.Errorf("%w: restore: %v", ErrInternal, err)
	}
	// The check reads the same rows: a fresh parse, so its WHERE is the
	// statement's own, not the one just extended.
	v, _, err := fresh()
	if err != nil || v == nil {
		return "", "", false, "", fmt.Errorf("%w: statement does not parse again: %v", ErrInternal, err)
	}
	sel := &ast.SelectStmt{
		SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true}, // the default; the restorer prints nothing for it
		Kind:           ast.SelectStmtKindSelect,
		Fields: &ast.FieldList{Fields: []*ast.SelectField{{Expr: &ast.AggregateFuncExpr{
			F: ast.AggFuncCount, Args: []ast.ExprNode{ast.NewValueExpr(1, "", "")}}}}},
		From:  v.TableRefs,
		Where: and(v.Where, binary(opcode.GE, &ast.ColumnNameExpr{Name: col()}, tok())),
	}
	if check, err = RestoreMode(sel, f.Mode); err != nil {
		return "", "", false, "", fmt.Errorf("%w: restore: %v", ErrInternal, err)
	}
	return update, check, true, "", nil
}

// and joins two conditions (either may be nil) with AND, keeping the
// first's grouping intact.
func and(a, b ast.ExprNode) ast.ExprNode {
	if a == nil {
		return b
	}
	return binary(opcode.LogicAnd, &ast.ParenthesesExpr{Expr: a}, b)
}
