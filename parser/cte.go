package parser

import "github.com/pingcap/tidb/pkg/parser/ast"

// cteFrame is one WITH clause in scope. A common table expression's name
// hides a table of that name in the query that owns the WITH and in the
// CTEs defined after it (and, WITH RECURSIVE, in its own body), not in its
// own body or earlier ones: there the name is the real table.
type cteFrame struct {
	owner   ast.Node
	with    *ast.WithClause
	visible int // how many of with.CTEs are visible now
}

// pushWith brings the CTEs of owner's WITH into scope; it must be called
// on entering owner, before owner's own tables are recorded.
func (an *analyzer) pushWith(owner ast.Node, w *ast.WithClause) {
	if w == nil || len(w.CTEs) == 0 {
		return
	}
	an.ctes = append(an.ctes, cteFrame{owner: owner, with: w, visible: len(w.CTEs)})
}

// popWith ends the scope of owner's WITH on leaving owner.
func (an *analyzer) popWith(owner ast.Node) {
	if n := len(an.ctes); n > 0 && an.ctes[n-1].owner == owner {
		an.ctes = an.ctes[:n-1]
	}
}

// enterCTE narrows the innermost WITH to the CTEs c's body may name.
func (an *analyzer) enterCTE(c *ast.CommonTableExpression) {
	f := an.frameOf(c)
	if f == nil {
		return
	}
	for i, cte := range f.with.CTEs {
		if cte == c {
			f.visible = i
			if f.with.IsRecursive {
				f.visible = i + 1
			}
			return
		}
	}
}

// leaveCTE widens the WITH again for the CTEs after c and the main query.
func (an *analyzer) leaveCTE(c *ast.CommonTableExpression) {
	if f := an.frameOf(c); f != nil {
		f.visible = len(f.with.CTEs)
	}
}

// frameOf returns the frame whose WITH defines c.
func (an *analyzer) frameOf(c *ast.CommonTableExpression) *cteFrame {
	for i := len(an.ctes) - 1; i >= 0; i-- {
		for _, cte := range an.ctes[i].with.CTEs {
			if cte == c {
				return &an.ctes[i]
			}
		}
	}
	return nil
}

// isCTE reports whether an unqualified table name names a CTE in scope.
func (an *analyzer) isCTE(name string) bool {
	for _, f := range an.ctes {
		for _, cte := range f.with.CTEs[:f.visible] {
			if cte.Name.L == name {
				return true
			}
		}
	}
	return false
}
