package parser

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// FenceUpdate makes a single-table UPDATE f conditional on a fencing token
// (rules[].fence in docs/configuration.md): the returned update also sets
// column = token and changes only rows whose column is below token, so a
// write from a holder whose lease has passed to a newer holder (who wrote
// a larger token) changes nothing. check is a SELECT COUNT(*) over the
// same rows whose column is already at or past token: run after the
// update changed no row, a non-zero count tells a stale write from a
// statement that matched nothing. Placeholders are bound from params as
// literals (see RewriteUpdate). Both statements are built on a private
// copy of f's UPDATE (see private) and restored from the AST for f.Mode
// (RestoreMode).
func FenceUpdate(f *Facts, column string, token uint64, params []any) (update, check string, ok bool, reason string, err error) {
	return fenceUpdate(f, column, token, params, false)
}

// fenceUpdate is FenceUpdate; reparse as for rewriteGuarded.
func fenceUpdate(f *Facts, column string, token uint64, params []any, reparse bool) (update, check string, ok bool, reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			update, check, ok, reason, err = "", "", false, "", fmt.Errorf("%w: fence panicked: %v", ErrInternal, r)
		}
	}()
	if f == nil || f.Kind != KindUpdate {
		return "", "", false, ReasonNotUpdate, nil
	}
	if f.Wrapped {
		return "", "", false, ReasonWrapped, nil
	}
	if f.ParamBase < 0 || len(params) < f.ParamBase+f.Params {
		return "", "", false, "", fmt.Errorf("%w: %d given, the statement needs %d", ErrRewriteParams, len(params), f.ParamBase+f.Params)
	}
	for _, a := range f.Assignments {
		if strings.EqualFold(a.Column, column) {
			return "", "", false, "assigns the fence column", nil
		}
	}
	u, reason, err := private(f, params[f.ParamBase:f.ParamBase+f.Params], reparse)
	if u == nil || reason != "" || err != nil {
		return "", "", false, reason, err
	}
	if u.MultipleTable || u.TableRefs == nil || u.TableRefs.TableRefs == nil || u.TableRefs.TableRefs.Right != nil {
		return "", "", false, ReasonMultiTable, nil
	}
	fc := fencing{column: column, token: token}
	where := u.Where
	fc.apply(u)
	if update, err = RestoreMode(u, f.Mode); err != nil {
		return "", "", false, "", fmt.Errorf("%w: restore: %v", ErrInternal, err)
	}
	if check, err = RestoreMode(fc.check(u, where), f.Mode); err != nil {
		return "", "", false, "", fmt.Errorf("%w: restore: %v", ErrInternal, err)
	}
	return update, check, true, "", nil
}

// fencing is a fence column and the token an UPDATE is made conditional on.
type fencing struct {
	column string
	token  uint64
}

func (fc fencing) col() *ast.ColumnName { return &ast.ColumnName{Name: ast.NewCIStr(fc.column)} }
func (fc fencing) tok() ast.ExprNode    { return ast.NewValueExpr(fc.token, "", "") }

// apply stamps u's rows with the token, and changes only rows whose fence
// is lower.
func (fc fencing) apply(u *ast.UpdateStmt) {
	u.List = append(u.List, &ast.Assignment{Column: fc.col(), Expr: fc.tok()})
	u.Where = and(u.Where, binary(opcode.LT, &ast.ColumnNameExpr{Name: fc.col()}, fc.tok()))
}

// check counts the rows that where (u's WHERE as the statement wrote it,
// before fencing and before any rewrite guard) names and that already
// carry a token >= this one. Restoring only reads the shared nodes.
func (fc fencing) check(u *ast.UpdateStmt, where ast.ExprNode) *ast.SelectStmt {
	return &ast.SelectStmt{
		SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true}, // the default; the restorer prints nothing for it
		Kind:           ast.SelectStmtKindSelect,
		Fields: &ast.FieldList{Fields: []*ast.SelectField{{Expr: &ast.AggregateFuncExpr{
			F: ast.AggFuncCount, Args: []ast.ExprNode{ast.NewValueExpr(1, "", "")}}}}},
		From:  u.TableRefs,
		Where: and(where, binary(opcode.GE, &ast.ColumnNameExpr{Name: fc.col()}, fc.tok())),
	}
}

// and joins two conditions (either may be nil) with AND, keeping the
// first's grouping intact.
func and(a, b ast.ExprNode) ast.ExprNode {
	if a == nil {
		return b
	}
	return binary(opcode.LogicAnd, &ast.ParenthesesExpr{Expr: a}, b)
}
