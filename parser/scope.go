package parser

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// scopeTable is a table of one query block: its index in Facts.Tables and
// the names a column qualifier may use for it.
type scopeTable struct {
	idx                 int
	schema, name, alias string
	// exact: compare qualifiers with the names as written (asWritten),
	// not lowercased (Options.CaseSensitiveNames).
	exact     bool
	asWritten struct{ schema, name, alias string }
}

// owns reports whether column c may belong to t. An unqualified column may
// belong to any table of its block: in a valid statement it belongs to the
// one table that has it, so giving it to every table is sound as long as
// the rule's key columns exist in the rule's table.
func (t scopeTable) owns(c *ast.ColumnName) bool {
	if c.Table.L == "" {
		return true
	}
	if t.exact {
		w := t.asWritten
		if c.Schema.O != "" && c.Schema.O != w.schema {
			return false
		}
		if w.alias != "" {
			return c.Schema.O == "" && c.Table.O == w.alias
		}
		return c.Table.O == w.name
	}
	if c.Schema.L != "" && c.Schema.L != t.schema {
		return false
	}
	if t.alias != "" {
		return c.Schema.L == "" && c.Table.L == t.alias
	}
	return c.Table.L == t.name
}

// addTable appends a TableRef for tn unless it names a CTE or has an empty
// name (an empty back-quoted name parses; MySQL rejects it); it returns the
// table's index in Facts.Tables, or -1.
func (an *analyzer) addTable(tn *ast.TableName, alias string, write bool, where *Predicate) int {
	if tn.Name.L == "" {
		return -1
	}
	if tn.Schema.L == "" {
		if an.isCTE(tn.Name.L) {
			return -1
		}
	}
	schema := tn.Schema.L
	if schema == "" {
		schema = an.db
	}
	an.f.Tables = append(an.f.Tables, TableRef{
		Schema: schema, Name: tn.Name.L, Alias: alias, Write: write, Where: where,
	})
	return len(an.f.Tables) - 1
}

// scopedCond is a condition with the span of the block's tables it may
// refer to: all of them for WHERE, the join's operands for an ON.
type scopedCond struct {
	expr       ast.ExprNode
	start, end int // indices into the block's tables
}

// block records the base tables of one query block (its FROM join tree)
// and gives each the predicate that WHERE and the ON of inner joins put on
// its rows. Derived tables and subqueries are blocks of their own, reached
// by the walk. It returns the block's tables.
func (an *analyzer) block(from ast.ResultSetNode, where ast.ExprNode) []scopeTable {
	var tables []scopeTable
	var conds []scopedCond
	if where != nil {
		conds = append(conds, scopedCond{expr: where})
	}
	an.joinTree(from, &tables, &conds)
	if where != nil {
		conds[0].end = len(tables) // WHERE sees every table
	}
	exprs := make([]ast.ExprNode, 0, len(conds))
	for i, t := range tables {
		exprs = exprs[:0]
		for _, c := range conds {
			// An ON sees only its join's operands: even an unqualified
			// column in it cannot belong to a table outside them.
			if c.start <= i && i < c.end {
				exprs = append(exprs, c.expr)
			}
		}
		an.f.Tables[t.idx].Where = buildPredicate(an, exprs, t)
	}
	return tables
}

// joinTree collects the base tables of a FROM tree and the ON conditions of
// its inner joins. The ON of an outer join does not restrict the rows of
// the preserved side and is not used.
func (an *analyzer) joinTree(n ast.ResultSetNode, tables *[]scopeTable, conds *[]scopedCond) {
	switch x := n.(type) {
	case *ast.Join:
		if x == nil {
			return
		}
		start := len(*tables)
		if x.Left != nil {
			an.joinTree(x.Left, tables, conds)
		}
		if x.Right != nil {
			an.joinTree(x.Right, tables, conds)
		}
		if x.On != nil && x.Tp != ast.LeftJoin && x.Tp != ast.RightJoin {
			*conds = append(*conds, scopedCond{expr: x.On.Expr, start: start, end: len(*tables)})
		}
	case *ast.TableSource:
		tn, ok := x.Source.(*ast.TableName)
		if !ok {
			return // derived table: its own block
		}
		idx := an.addTable(tn, x.AsName.L, false, nil)
		if idx < 0 {
			return
		}
		st := scopeTable{idx: idx, schema: an.f.Tables[idx].Schema, name: tn.Name.L, alias: x.AsName.L, exact: an.exactNames}
		st.asWritten.schema, st.asWritten.name, st.asWritten.alias = tn.Schema.O, tn.Name.O, x.AsName.O
		if st.asWritten.schema == "" {
			st.asWritten.schema = an.dbAsWritten
		}
		*tables = append(*tables, st)
	}
}

// update records UPDATE's tables, marks the assigned ones as written, and
// classifies its SET list.
func (an *analyzer) update(u *ast.UpdateStmt) {
	if u.TableRefs == nil {
		return
	}
	tables := an.block(u.TableRefs.TableRefs, u.Where)
	for _, as := range u.List {
		an.f.Assignments = append(an.f.Assignments, an.assignment(as))
	}
	for _, t := range tables {
		if len(tables) == 1 {
			an.f.Tables[t.idx].Write = true
			continue
		}
		for _, as := range u.List {
			if as.Column == nil || as.Column.Table.L == "" || t.owns(as.Column) {
				an.f.Tables[t.idx].Write = true
			}
		}
	}
}

// delete records DELETE's tables and marks the deleted-from ones.
func (an *analyzer) delete(d *ast.DeleteStmt) {
	if d.TableRefs == nil {
		return
	}
	tables := an.block(d.TableRefs.TableRefs, d.Where)
	if !d.IsMultiTable || d.Tables == nil {
		for _, t := range tables {
			an.f.Tables[t.idx].Write = true
		}
		return
	}
	for _, target := range d.Tables.Tables {
		for _, t := range tables {
			if deleteTargets(t, target) {
				an.f.Tables[t.idx].Write = true
			}
		}
	}
}

// deleteTargets reports whether a multi-table DELETE target names t (by
// alias, or by name when t has no alias).
func deleteTargets(t scopeTable, target *ast.TableName) bool {
	if target.Schema.L != "" && target.Schema.L != t.schema {
		return false
	}
	if t.alias != "" {
		return target.Name.L == t.alias
	}
	return target.Name.L == t.name
}
