package parser

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Projection describes a view that is a plain projection of one table: a
// write through the view changes the rows of that table whose columns the
// view renames.
type Projection struct {
	// Schema and Table name the one table (or view) the definition reads,
	// lowercased; Schema is the view's database when unqualified.
	Schema, Table string
	// Columns maps each view column to the column of Table it shows, both
	// lowercased.
	Columns map[string]string
}

// ViewProjection parses a view's definition (the SELECT that
// information_schema.VIEWS.VIEW_DEFINITION holds), in the view's database
// db. It returns the Projection when the SELECT lists only plain columns
// of one table (aliases allowed), with an optional WHERE without
// subqueries, and nothing else: no join, DISTINCT, GROUP BY, HAVING,
// aggregate, window, LIMIT, UNION, CTE or subquery. Otherwise it returns
// nil and a short reason ("it joins tables"). Safe for concurrent use.
func ViewProjection(def, db string) (*Projection, string) {
	a, err := Analyze(def, db)
	switch {
	case err != nil:
		return nil, "its definition could not be analysed"
	case a.Unparsed:
		return nil, "its definition could not be parsed"
	case len(a.Stmts) != 1 || a.Stmts[0].Kind != KindSelect:
		return nil, "its definition is not one SELECT"
	case len(a.Stmts[0].Tables) != 1:
		return nil, fmt.Sprintf("it reads %d tables", len(a.Stmts[0].Tables))
	}
	stmts, err := Parse(def)
	if err != nil || len(stmts) != 1 {
		return nil, "its definition could not be parsed"
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok {
		return nil, "it combines queries (UNION, EXCEPT, INTERSECT)"
	}
	if why := notPlainSelect(sel); why != "" {
		return nil, why
	}
	ref := a.Stmts[0].Tables[0]
	p := &Projection{Schema: ref.Schema, Table: ref.Name, Columns: map[string]string{}}
	for _, f := range sel.Fields.Fields {
		col, ok := f.Expr.(*ast.ColumnNameExpr)
		if f.WildCard != nil || !ok {
			return nil, "its select list holds more than plain columns"
		}
		name := f.AsName.L
		if name == "" {
			name = col.Name.Name.L
		}
		p.Columns[name] = col.Name.Name.L
	}
	return p, ""
}

// notPlainSelect says why sel is more than a projection with a WHERE of
// one table ("" when it is not).
func notPlainSelect(sel *ast.SelectStmt) string {
	switch {
	case sel.With != nil:
		return "it has a WITH clause"
	case sel.Kind != ast.SelectStmtKindSelect:
		return "it is not a SELECT of a table"
	case sel.Distinct:
		return "it is DISTINCT"
	case sel.GroupBy != nil || sel.Having != nil:
		return "it groups rows"
	case len(sel.WindowSpecs) > 0:
		return "it has windows"
	case sel.Limit != nil:
		return "it has a LIMIT"
	case sel.Fields == nil || sel.From == nil || sel.From.TableRefs == nil:
		return "it has no table"
	case sel.From.TableRefs.Right != nil:
		return "it joins tables"
	}
	src, ok := sel.From.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return "it joins tables"
	}
	if _, ok := src.Source.(*ast.TableName); !ok {
		return "it reads a derived table"
	}
	return ""
}
