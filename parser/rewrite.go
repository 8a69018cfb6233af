package parser

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Errors of RewriteUpdate. A statement the rewrite does not apply to is not
// an error: RewriteUpdate says so with ok=false and a reason.
var (
	// ErrRewriteSpec is wrapped when the RewriteSpec itself is invalid
	// (unknown mode, a Min that is not a number).
	ErrRewriteSpec = errors.New("parser: invalid rewrite spec")
	// ErrRewriteParams is wrapped when params are too few for the text or
	// hold a Go type that is not a binary-protocol value.
	ErrRewriteParams = errors.New("parser: unusable rewrite parameters")
)

// Rewrite modes (the rules.yaml values).
const (
	RewriteDelta = "delta"
	RewriteCAS   = "cas"
)

// Reasons RewriteUpdate gives with ok=false. They are short, stable and
// fit for a metric label.
const (
	ReasonNotUpdate          = "not an update"
	ReasonMultiTable         = "multi-table"
	ReasonNoAssignment       = "no assignment to column"
	ReasonSeveralAssignments = "several assignments to column"
	ReasonExpression         = "expression"
	ReasonNothingRemembered  = "nothing remembered"
	ReasonRelativeNoMin      = "relative, no min"
	ReasonNonNumeric         = "non-numeric"
	ReasonOutOfRange         = "out of range"
	ReasonSeveralRows        = "several rows"
	ReasonParamPosition      = "placeholder in ORDER BY/LIMIT"
	ReasonNonFinite          = "non-finite float"
	ReasonUnsafeCharset      = "unsafe client charset"
	ReasonNoBackslashEscapes = "NO_BACKSLASH_ESCAPES"
	ReasonHexNumber          = "0x hex literal"
	ReasonWrapped            = "SET STATEMENT"
)

// RewriteSpec is how one rule guards one numeric column (rules[].rewrite in
// docs/configuration.md).
type RewriteSpec struct {
	// Column is the guarded column (case-insensitive).
	Column string
	// Mode is RewriteDelta or RewriteCAS.
	Mode string
	// Min is the lower bound, as an exact decimal ("0", "-1.5", "1e3");
	// "" means none. It guards delta rewrites and relative updates.
	Min string
	// Old is the value the session last read for the row, in MySQL's text
	// form ("17", "17.50"); nil when nothing is remembered.
	Old []byte
	// Key are the rule's key columns. When set, a rewrite that uses Old
	// requires the WHERE to pin exactly one value per key column (else
	// ReasonSeveralRows). When empty, the caller vouches for one row.
	Key []string
	// ClientCharset is the session's character_set_client ("" for the
	// usual utf8mb4). On one where RewriteSafeCharset is false no rewrite
	// applies (ReasonUnsafeCharset): the escaped output would be unsafe.
	ClientCharset string
	// NoBackslashEscapes, when true, refuses every rewrite
	// (ReasonNoBackslashEscapes), for a caller that knows the session's
	// sql_mode holds NO_BACKSLASH_ESCAPES but analysed the text without it.
	// A Facts analysed under that mode (Facts.Mode) needs no refusal: the
	// rewrite is restored for it (RestoreMode).
	NoBackslashEscapes bool
	// Fence, when set, is the rule's fence column and FenceToken the
	// lock's fencing token: the guarded UPDATE is fenced in the same pass
	// (as FenceUpdate would fence it), and Guarded.FenceCheck is set.
	// An UPDATE that itself assigns the fence column is not fenced.
	Fence      string
	FenceToken uint64
}

// maxDigits and maxScale keep exact numbers within MySQL's DECIMAL(65,30): a
// longer literal would be read back as a DOUBLE.
const maxDigits, maxScale = 65, 30

// RewriteUpdate rewrites a single-table UPDATE (f of KindUpdate) into its
// guarded form:
//
//	SET col = new, Old known, delta: SET col = col + (new - old) WHERE (w) AND col + (new - old) >= min
//	SET col = new, Old known, cas:   SET col = new WHERE (w) AND col = old
//	SET col = col ± d, Min set:      SET col = col ± d WHERE (w) AND col ± d >= min
//
// (new - old is computed exactly and written `col - 3`, `col + 1.75`; no
// Min, no guard in delta mode). It also substitutes params (the values of
// the text's placeholders, params[i] for placeholder i text-wide: nil, Go
// integers, float32/float64, []byte, string) for the statement's `?`, so
// sql is a complete text statement; other assignments stay as written. It returns ok=false and one of the Reason
// constants when no rewrite applies; err for an invalid spec, unusable
// params or an internal failure. The rewrite works on a private copy of
// f's UPDATE (f is not modified; see private) and renders it with
// Restore: values are AST literals, so their quoting is the restorer's,
// for the sql_mode f was read under (f.Mode, see RestoreMode).
// spec.ClientCharset says whether the session reads escaped strings
// safely. Nothing is parsed for a text statement (the tests and
// FuzzRewriteUpdate check that every output parses back as one UPDATE).
// Safe for concurrent use.
func RewriteUpdate(f *Facts, spec RewriteSpec, params []any) (sql string, ok bool, reason string, err error) {
	g, ok, reason, err := RewriteGuarded(f, spec, params)
	return g.SQL, ok, reason, err
}

// Guards a rewritten UPDATE carries: what it means when the UPDATE changed
// no row although its row exists.
const (
	// GuardNone: no guard (delta without min); a row that exists is written.
	GuardNone = ""
	// GuardValue (cas): the column no longer holds the value read.
	GuardValue = "value"
	// GuardMin (delta, relative): the write would take the column below min.
	GuardMin = "min"
)

// Guarded is a rewritten UPDATE and the query that explains a lost race.
type Guarded struct {
	// SQL is the guarded UPDATE, a complete text statement.
	SQL string
	// Guard says what the UPDATE's added condition tests (GuardNone,
	// GuardValue, GuardMin).
	Guard string
	// Check, when Guard is not GuardNone, is a SELECT of the guard
	// condition for the rows the UPDATE's own WHERE names, as a locking
	// read (FOR UPDATE): it sees the latest committed row, not a
	// transaction's snapshot. Run after the UPDATE changed no row, it
	// answers no row (no row matched the WHERE), 0 or NULL (the guard
	// held: the race was lost), or 1 (the row matched and the UPDATE left
	// it as it was, as a delta of 0 does).
	Check string
	// FenceCheck, when the UPDATE was fenced (RewriteSpec.Fence), counts
	// the rows its WHERE names that already carry a token >= the fence
	// token (as FenceUpdate's check).
	FenceCheck string
}

// RewriteGuarded is RewriteUpdate with the guard and its check query.
func RewriteGuarded(f *Facts, spec RewriteSpec, params []any) (g Guarded, ok bool, reason string, err error) {
	return rewriteGuarded(f, spec, params, false)
}

// rewriteGuarded is RewriteGuarded; reparse makes it work on a fresh parse
// even where a copy would do (for the tests that compare the two).
func rewriteGuarded(f *Facts, spec RewriteSpec, params []any, reparse bool) (g Guarded, ok bool, reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			g, ok, reason, err = Guarded{}, false, "", fmt.Errorf("%w: rewrite panicked: %v", ErrInternal, r)
		}
	}()
	if spec.Mode != RewriteDelta && spec.Mode != RewriteCAS {
		return Guarded{}, false, "", fmt.Errorf("%w: mode %q", ErrRewriteSpec, spec.Mode)
	}
	var floor *big.Rat
	if spec.Min != "" {
		if floor, ok = parseNumber(spec.Min); !ok || inRange(floor) != "" {
			return Guarded{}, false, "", fmt.Errorf("%w: min %q is not a DECIMAL(65,30) number", ErrRewriteSpec, spec.Min)
		}
	}
	if !RewriteSafeCharset(spec.ClientCharset) {
		return Guarded{}, false, ReasonUnsafeCharset, nil
	}
	if spec.NoBackslashEscapes {
		return Guarded{}, false, ReasonNoBackslashEscapes, nil
	}
	if f != nil && f.Wrapped {
		return Guarded{}, false, ReasonWrapped, nil
	}
	if f == nil || f.Kind != KindUpdate {
		return Guarded{}, false, ReasonNotUpdate, nil
	}
	if u, isU := f.Node.(*ast.UpdateStmt); !isU || u.MultipleTable ||
		u.TableRefs == nil || u.TableRefs.TableRefs == nil || u.TableRefs.TableRefs.Right != nil {
		return Guarded{}, false, ReasonMultiTable, nil
	}
	if f.ParamBase < 0 || len(params) < f.ParamBase+f.Params {
		return Guarded{}, false, "", fmt.Errorf("%w: %d given, the statement needs %d", ErrRewriteParams, len(params), f.ParamBase+f.Params)
	}
	own := params[f.ParamBase : f.ParamBase+f.Params]
	idx, reason := guardedAssignment(f, spec.Column)
	if reason != "" {
		return Guarded{}, false, reason, nil
	}
	p, reason, err := plan(f, f.Assignments[idx], spec, floor, params)
	if reason != "" || err != nil {
		return Guarded{}, false, reason, err
	}
	g, reason, err = render(f, idx, p, own, fenceOf(f, spec), reparse)
	return g, reason == "" && err == nil, reason, err
}

// fenceOf is the fence a rewrite adds, nil when none applies.
func fenceOf(f *Facts, spec RewriteSpec) *fencing {
	if spec.Fence == "" {
		return nil
	}
	for _, a := range f.Assignments {
		if strings.EqualFold(a.Column, spec.Fence) {
			return nil
		}
	}
	return &fencing{column: spec.Fence, token: spec.FenceToken}
}

// render applies p to a private copy of f's UPDATE whose placeholders it
// binds to own, and restores it and its check.
func render(f *Facts, idx int, p rewritePlan, own []any, fence *fencing, reparse bool) (Guarded, string, error) {
	u, reason, err := private(f, own, reparse)
	if reason != "" || err != nil {
		return Guarded{}, reason, err
	}
	if len(u.List) != len(f.Assignments) {
		return Guarded{}, "", fmt.Errorf("%w: %d assignments, %d in the facts", ErrInternal, len(u.List), len(f.Assignments))
	}
	where := u.Where
	guard := p.apply(u, u.List[idx])
	g := Guarded{Guard: p.kind()}
	if fence != nil {
		fence.apply(u)
		if g.FenceCheck, err = RestoreMode(fence.check(u, where), f.Mode); err != nil {
			return Guarded{}, "", fmt.Errorf("%w: restore fence check: %v", ErrInternal, err)
		}
	}
	if g.SQL, err = RestoreMode(u, f.Mode); err != nil {
		return Guarded{}, "", fmt.Errorf("%w: restore: %v", ErrInternal, err)
	}
	if guard != nil {
		if g.Check, err = RestoreMode(checkOf(u, where, guard), f.Mode); err != nil {
			return Guarded{}, "", fmt.Errorf("%w: restore check: %v", ErrInternal, err)
		}
	}
	return g, "", nil
}

// private is an UPDATE render may change without touching f, which is
// shared: for a text statement (no placeholders) a copy of f's node down
// to its assignments, the only nodes apply and the fence replace (the
// WHERE is replaced whole, never changed in place; restoring only reads
// the shared nodes); for a prepared one, whose placeholders substitute
// replaces wherever they are (or with reparse), a fresh parse of f.Text.
func private(f *Facts, own []any, reparse bool) (*ast.UpdateStmt, string, error) {
	if hexForms(f.Text, f.Mode)&hexNumbers != 0 {
		// The tree writes 0x10 back as x'10', which MariaDB reads as a
		// string (0 in arithmetic), not 16.
		return nil, ReasonHexNumber, nil
	}
	if u, isU := f.Node.(*ast.UpdateStmt); isU && f.Params == 0 && len(own) == 0 && !reparse {
		c := *u
		c.List = make([]*ast.Assignment, len(u.List))
		for i, a := range u.List {
			ca := *a
			c.List[i] = &ca
		}
		return &c, "", nil
	}
	stmts, err := ParseMode(f.Text, f.Mode)
	if err != nil || len(stmts) != 1 {
		return nil, "", fmt.Errorf("%w: statement does not parse again: %v", ErrInternal, err)
	}
	u, isU := stmts[0].(*ast.UpdateStmt)
	if !isU {
		return nil, "", fmt.Errorf("%w: statement parses differently again", ErrInternal)
	}
	if reason, err := substitute(u, own); reason != "" || err != nil {
		return nil, reason, err
	}
	return u, "", nil
}

// checkOf is `SELECT guard FROM <u's table> WHERE <where> FOR UPDATE`.
func checkOf(u *ast.UpdateStmt, where, guard ast.ExprNode) *ast.SelectStmt {
	return &ast.SelectStmt{
		Kind:           ast.SelectStmtKindSelect,
		SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true},
		Fields:         &ast.FieldList{Fields: []*ast.SelectField{{Expr: guard}}},
		From:           u.TableRefs,
		Where:          where,
		LockInfo:       &ast.SelectLockInfo{LockType: ast.SelectLockForUpdate},
	}
}

// guardedAssignment finds the one assignment to column.
func guardedAssignment(f *Facts, column string) (int, string) {
	idx := -1
	for i, a := range f.Assignments {
		if strings.EqualFold(a.Column, column) {
			if idx >= 0 {
				return -1, ReasonSeveralAssignments
			}
			idx = i
		}
	}
	if idx < 0 {
		return -1, ReasonNoAssignment
	}
	return idx, ""
}

// rewritePlan is what to do to the AST: replace the assignment's value
// (set, for delta) and AND a guard onto WHERE. Both are numbers; the
// guard's left side is the column plus delta, or the assignment's own
// expression (relative), or the column compared for equality (cas).
type rewritePlan struct {
	setDelta *big.Rat // delta: SET col = col ± |delta|
	guardMin *big.Rat // col ± |delta| >= min (delta) or expr >= min (relative)
	casOld   *big.Rat // col = old
	relative bool
}

// plan decides the rewrite from the facts alone.
func plan(f *Facts, a Assignment, spec RewriteSpec, floor *big.Rat, params []any) (rewritePlan, string, error) {
	switch a.Kind {
	case AssignRelative:
		if floor == nil {
			return rewritePlan{}, ReasonRelativeNoMin, nil
		}
		if _, reason, err := numberOf(a.Delta, params); reason != "" || err != nil {
			return rewritePlan{}, reason, err
		}
		return rewritePlan{guardMin: floor, relative: true}, "", nil
	case AssignLiteral, AssignParam:
	default:
		return rewritePlan{}, ReasonExpression, nil
	}
	if spec.Old == nil {
		return rewritePlan{}, ReasonNothingRemembered, nil
	}
	if len(spec.Key) > 0 && !oneRow(f, spec.Key, params) {
		return rewritePlan{}, ReasonSeveralRows, nil
	}
	old, isNum := parseNumber(string(spec.Old))
	if !isNum {
		return rewritePlan{}, ReasonNonNumeric, nil
	}
	nv, reason, err := numberOf(a.Value, params)
	if reason != "" || err != nil {
		return rewritePlan{}, reason, err
	}
	if spec.Mode == RewriteCAS {
		return rewritePlan{casOld: old}, inRange(old), nil
	}
	d := new(big.Rat).Sub(nv, old)
	return rewritePlan{setDelta: d, guardMin: floor}, inRange(d), nil
}

// kind is the Guard constant for the condition apply adds.
func (p rewritePlan) kind() string {
	switch {
	case p.casOld != nil:
		return GuardValue
	case p.guardMin != nil:
		return GuardMin
	}
	return GuardNone
}

// apply modifies the fresh UPDATE u whose guarded assignment is as, and
// returns the condition it ANDed onto the WHERE (nil when none).
func (p rewritePlan) apply(u *ast.UpdateStmt, as *ast.Assignment) ast.ExprNode {
	col := func() ast.ExprNode {
		c := *as.Column
		return &ast.ColumnNameExpr{Name: &c}
	}
	var guard ast.ExprNode
	switch {
	case p.casOld != nil:
		guard = binary(opcode.EQ, col(), number(p.casOld))
	case p.relative:
		guard = binary(opcode.GE, as.Expr, number(p.guardMin))
	default:
		step := func() ast.ExprNode {
			op, d := opcode.Plus, p.setDelta
			if d.Sign() < 0 {
				op, d = opcode.Minus, new(big.Rat).Neg(d)
			}
			return binary(op, col(), number(d))
		}
		as.Expr = step()
		if p.guardMin != nil {
			guard = binary(opcode.GE, step(), number(p.guardMin))
		}
	}
	switch {
	case guard == nil:
	case u.Where == nil:
		u.Where = guard
	default:
		w := u.Where
		if _, isParen := w.(*ast.ParenthesesExpr); !isParen {
			w = &ast.ParenthesesExpr{Expr: w}
		}
		u.Where = binary(opcode.LogicAnd, w, guard)
	}
	return guard
}

func binary(op opcode.Op, l, r ast.ExprNode) ast.ExprNode {
	return &ast.BinaryOperationExpr{Op: op, L: l, R: r}
}

// RewriteSafeCharset reports whether RewriteUpdate's output may be sent on
// a connection whose character_set_client is charset: false for big5,
// cp932, gbk, sjis and gb18030, where byte 0x5c (backslash) can end a
// multi-byte character and so undo the escaping of a string literal: the
// value bytes bf 5c 27 are written bf 5c 5c 27 27, which gbk reads as one
// character, an escaped quote and a quote that ends the literal.
func RewriteSafeCharset(charset string) bool {
	switch strings.ToLower(charset) {
	case "big5", "cp932", "gbk", "sjis", "gb18030":
		return false
	}
	return true
}
