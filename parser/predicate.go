package parser

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// hardMaxAtoms caps every predicate, even one that grows only linearly
// (a long IN list ANDed with many equalities).
const hardMaxAtoms = 1 << 17

// workBudget bounds the work of all predicates of one statement (nodes
// visited plus atoms copied), so that no text makes the analysis slow: a
// statement that exhausts it gets Unkeyed predicates for the remaining
// tables.
const workBudget = 1 << 19

// predBuilder turns a condition into DNF for one table: atoms on other
// tables and irreducible parts count as TRUE (and set residual).
type predBuilder struct {
	an       *analyzer
	t        scopeTable
	residual bool
	overflow bool
}

// trueDNF is the DNF of TRUE: one empty conjunction.
func trueDNF() []Conj { return []Conj{nil} }

func isTrue(d []Conj) bool {
	for _, c := range d {
		if len(c) == 0 {
			return true
		}
	}
	return false
}

func atomCount(d []Conj) int {
	n := 0
	for _, c := range d {
		n += len(c)
	}
	return n
}

// buildPredicate is the predicate that the ANDed conds put on table t.
func buildPredicate(an *analyzer, conds []ast.ExprNode, t scopeTable) *Predicate {
	b := &predBuilder{an: an, t: t}
	d := b.andAll(conds)
	if b.overflow {
		return &Predicate{Residual: true, Unkeyed: true}
	}
	return &Predicate{Or: d, Residual: b.residual}
}

// spend charges n units of work to the statement; false once it is spent.
func (b *predBuilder) spend(n int) bool {
	if b.an.budget -= n; b.an.budget < 0 {
		b.overflow = true
	}
	return !b.overflow
}

// opaque is a condition that says nothing usable about t.
func (b *predBuilder) opaque() []Conj {
	b.residual = true
	return trueDNF()
}

func (b *predBuilder) expr(e ast.ExprNode) []Conj {
	if !b.spend(1) {
		return trueDNF()
	}
	switch x := unparen(e).(type) {
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd:
			return b.andAll(flatten(x, opcode.LogicAnd))
		case opcode.LogicOr:
			return b.orAll(flatten(x, opcode.LogicOr))
		case opcode.EQ, opcode.NullEQ:
			return b.eq(x.L, x.R)
		}
	case *ast.PatternInExpr:
		if !x.Not && x.Sel == nil {
			return b.in(x.Expr, x.List)
		}
		if v := constSubquery(x.Sel); !x.Not && v != nil {
			return b.eq(x.Expr, v) // e IN (SELECT k) is e = k
		}
	case *ast.BetweenExpr:
		// e BETWEEN k AND k compares e with k alone: e = k.
		if lo, ok := b.an.constValue(x.Left); ok && !x.Not && lo.Kind != ValueParam {
			if hi, ok := b.an.constValue(x.Right); ok && hi == lo {
				return b.eq(x.Expr, x.Left)
			}
		}
	case *ast.UnaryOperationExpr:
		// NOT (e <> k) is e = k, NULL where e is NULL as e = k is.
		if ne, ok := unparen(x.V).(*ast.BinaryOperationExpr); ok && (x.Op == opcode.Not || x.Op == opcode.Not2) && ne.Op == opcode.NE {
			return b.eq(ne.L, ne.R)
		}
	}
	return b.opaque()
}

// constSubquery returns k for a subquery that is SELECT k and nothing else
// (no FROM, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT, INTO or WITH), whose
// one row is k; nil otherwise.
func constSubquery(e ast.ExprNode) ast.ExprNode {
	sq, ok := e.(*ast.SubqueryExpr)
	if !ok {
		return nil
	}
	sel, ok := sq.Query.(*ast.SelectStmt)
	if !ok || sel.From != nil || sel.Where != nil || sel.GroupBy != nil || sel.Having != nil || sel.OrderBy != nil ||
		sel.Limit != nil || sel.SelectIntoOpt != nil || sel.With != nil || sel.LockInfo != nil || sel.WindowSpecs != nil ||
		sel.Fields == nil || len(sel.Fields.Fields) != 1 || sel.Fields.Fields[0].WildCard != nil || sel.Kind != ast.SelectStmtKindSelect {
		return nil
	}
	return sel.Fields.Fields[0].Expr
}

// flatten lists the operands of a chain of one logical operator, left to
// right, without recursion (a chain may be thousands long).
func flatten(e ast.ExprNode, op opcode.Op) []ast.ExprNode {
	var out []ast.ExprNode
	stack := []ast.ExprNode{e}
	for len(stack) > 0 {
		n := unparen(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		if bin, ok := n.(*ast.BinaryOperationExpr); ok && bin.Op == op {
			stack = append(stack, bin.R, bin.L)
			continue
		}
		out = append(out, n)
	}
	return out
}

// andAll is the DNF of the conjunction of terms: the single-conjunction
// terms merge into one conjunction in linear time, then the product with
// each disjunction is taken.
func (b *predBuilder) andAll(terms []ast.ExprNode) []Conj {
	var single Conj
	var multis [][]Conj
	for _, t := range terms {
		d := b.expr(t)
		if b.overflow {
			return trueDNF()
		}
		if len(d) == 1 {
			single = append(single, d[0]...)
		} else {
			multis = append(multis, d)
		}
	}
	if !b.spend(len(single)) {
		return trueDNF()
	}
	out := []Conj{single}
	for _, m := range multis {
		if out = b.and(out, m); b.overflow {
			return trueDNF()
		}
	}
	return out
}

// orAll is the DNF of the disjunction of terms; TRUE absorbs everything.
func (b *predBuilder) orAll(terms []ast.ExprNode) []Conj {
	var out []Conj
	n := 0
	for _, t := range terms {
		d := b.expr(t)
		if b.overflow || isTrue(d) {
			return trueDNF()
		}
		if n += atomCount(d); n > hardMaxAtoms || !b.spend(len(d)) {
			b.overflow = true
			return trueDNF()
		}
		out = append(out, d...)
	}
	return out
}

// and is the cross product of two DNFs, bounded by MaxAtoms when both
// sides are disjunctions, by hardMaxAtoms always, and by the budget.
func (b *predBuilder) and(l, r []Conj) []Conj {
	if len(l) == 1 && len(l[0]) == 0 {
		return r
	}
	if len(r) == 1 && len(r[0]) == 0 {
		return l
	}
	size := len(r)*atomCount(l) + len(l)*atomCount(r)
	if size > hardMaxAtoms || (size > MaxAtoms && len(l) > 1 && len(r) > 1) || !b.spend(size) {
		b.overflow = true
		return trueDNF()
	}
	out := make([]Conj, 0, len(l)*len(r))
	for _, lc := range l {
		for _, rc := range r {
			c := make(Conj, 0, len(lc)+len(rc))
			c = append(append(c, lc...), rc...)
			out = append(out, c)
		}
	}
	return out
}

// eq handles `l = r` and `l <=> r`: column = constant either way round, and
// row constructors element by element.
func (b *predBuilder) eq(l, r ast.ExprNode) []Conj {
	l, r = unparen(l), unparen(r)
	if lr, ok := l.(*ast.RowExpr); ok {
		rr, ok := r.(*ast.RowExpr)
		if !ok || len(lr.Values) != len(rr.Values) {
			return b.opaque()
		}
		d := trueDNF()
		for i := range lr.Values {
			if d = b.and(d, b.eq(lr.Values[i], rr.Values[i])); b.overflow {
				return trueDNF()
			}
		}
		return d
	}
	col, val, ok := b.an.colConst(l, r)
	if !ok || col.Name.L == "" { // `` parses, MySQL rejects it
		return b.opaque()
	}
	if !b.t.owns(col) {
		b.residual = true
		return trueDNF()
	}
	return []Conj{{Atom{Column: col.Name.L, Value: val}}}
}

// in handles `e IN (list)`: a disjunction of equalities.
func (b *predBuilder) in(e ast.ExprNode, list []ast.ExprNode) []Conj {
	e = unparen(e)
	if _, isRow := e.(*ast.RowExpr); isRow {
		var d []Conj
		n := 0
		for _, item := range list {
			sub := b.eq(e, item)
			if isTrue(sub) {
				return trueDNF()
			}
			if n += atomCount(sub); n > hardMaxAtoms {
				b.overflow = true
				return trueDNF()
			}
			d = append(d, sub...)
		}
		if d == nil {
			return b.opaque()
		}
		return d
	}
	col, ok := e.(*ast.ColumnNameExpr)
	if !ok || col.Name.Name.L == "" {
		return b.opaque()
	}
	if !b.t.owns(col.Name) {
		b.residual = true
		return trueDNF()
	}
	if len(list) > hardMaxAtoms || !b.spend(len(list)) {
		b.overflow = true
		return trueDNF()
	}
	d := make([]Conj, 0, len(list))
	atoms := make([]Atom, len(list))
	for i, item := range list {
		v, ok := b.an.constValue(item)
		if !ok {
			return b.opaque()
		}
		atoms[i] = Atom{Column: col.Name.Name.L, Value: v}
		d = append(d, atoms[i:i+1:i+1])
	}
	if len(d) == 0 {
		return b.opaque()
	}
	return d
}

// colConst recognises `column = constant` and `constant = column`.
func (an *analyzer) colConst(l, r ast.ExprNode) (*ast.ColumnName, Value, bool) {
	if c, ok := l.(*ast.ColumnNameExpr); ok {
		if v, ok := an.constValue(r); ok {
			return c.Name, v, true
		}
		return nil, Value{}, false
	}
	if c, ok := r.(*ast.ColumnNameExpr); ok {
		if v, ok := an.constValue(l); ok {
			return c.Name, v, true
		}
	}
	return nil, Value{}, false
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}
