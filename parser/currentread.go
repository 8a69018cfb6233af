package parser

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Current reads. InnoDB answers a plain query block in a REPEATABLE READ
// transaction from the transaction's snapshot, and a block with LOCK IN
// SHARE MODE from the latest committed rows. The clause belongs to one
// query block: MariaDB (10.11, measured) reads the rows of a subquery,
// derived table, CTE body or UNION branch without the clause from the
// snapshot even when the outer block has it, and takes the clause inside
// a UNION only on a branch in parentheses. So a SELECT is made a current
// read by giving every block that reads a table and has no locking clause
// its own clause: before the ')' that ends a block in parentheses, at the
// end of the statement for the outer block, and around an unparenthesized
// UNION branch, "(branch LOCK IN SHARE MODE)".
//
// Where the clauses go is found on the statement's tokens and then
// proven: the edited text must parse to the statement's own tree with a
// share lock on exactly those blocks (both rendered by Restore and
// compared). A text whose edit cannot be proven is not made current; the
// caller refuses it.

// CurrentReadClause is the locking clause the edits add.
const CurrentReadClause = " LOCK IN SHARE MODE"

// currentEdit puts text before the token with ordinal tok (over the
// lexer's tokens of the text; the number of tokens stands for the end).
type currentEdit struct {
	tok  int
	text string
}

// currentPlan is the proven edit of a Facts' Text, applicable to every
// text of its shape: ntok tokens, edits sorted by tok. ok is false for a
// text that cannot be made current.
type currentPlan struct {
	ok    bool
	ntok  int
	edits []currentEdit
}

var notCurrent = &currentPlan{}

// CurrentReadText returns text (one SELECT, as the server reads it:
// comments blanked, executable comments expanded) with a locking clause
// on every query block that reads a table without one, proven to parse
// under m to the same statement with share locks on those blocks. ok is
// false for anything else: more than one statement, not a SELECT, INTO
// anywhere (the parser reads no clause after it), TABLE statements, or an
// edit the proof rejects.
func CurrentReadText(text string, m Mode) (sql string, ok bool) {
	p := planCurrentRead(text, m)
	if !p.ok {
		return "", false
	}
	return p.apply(strings.TrimRight(text, " \t\r\n;"), m)
}

// CurrentReadOK reports whether f's Text can be made a current read,
// proving it once per Facts (never for a Wrapped statement, whose text
// goes with its SET STATEMENT prefix). The proof holds for every text of f's shape
// too (parser.Cache.AnalyzeShaped): such a text has a literal (one token)
// where Text has a `?` (one token) and no comments, so their tokens line
// up.
func (f *Facts) CurrentReadOK() bool {
	return f.currentPlan().ok
}

// AsCurrentRead returns text, f's Text or a text of its shape, with the
// clauses CurrentReadOK proved. ok is false if CurrentReadOK does not
// hold or text's tokens do not line up with Text's.
func (f *Facts) AsCurrentRead(text string) (sql string, ok bool) {
	p := f.currentPlan()
	if !p.ok {
		return "", false
	}
	return p.apply(strings.TrimRight(text, " \t\r\n;"), f.Mode)
}

// plainBlocks counts the query blocks of stmt that read a table without
// a locking clause (a TABLE statement among them).
func plainBlocks(stmt ast.StmtNode) int {
	v := &blockLocker{count: true}
	stmt.Accept(v)
	return v.locked
}

func (f *Facts) currentPlan() *currentPlan {
	if f.current == nil || f.Wrapped {
		return notCurrent
	}
	if p := f.current.Load(); p != nil {
		return p
	}
	p := planCurrentRead(f.Text, f.Mode)
	f.current.Store(p)
	return p
}

// apply makes p's edits to text, whose tokens must number p.ntok. It
// runs for every current read a transaction sends, so the tokens are
// counted as they come and only the edits' positions kept.
func (p *currentPlan) apply(text string, m Mode) (string, bool) {
	var small [4]int
	at := small[:0]
	if len(p.edits) > len(small) {
		at = make([]int, 0, len(p.edits))
	}
	l := &lexer{s: text, mode: m, strings: true}
	n := 0
	for {
		t, ok := l.next()
		if !ok {
			break
		}
		for len(at) < len(p.edits) && p.edits[len(at)].tok == n {
			at = append(at, t.pos)
		}
		n++
	}
	if n != p.ntok {
		return "", false
	}
	for len(at) < len(p.edits) { // edits at the end of the text
		at = append(at, len(text))
	}
	var b strings.Builder
	b.Grow(len(text) + len(p.edits)*len(CurrentReadClause))
	last := 0
	for i, e := range p.edits {
		pos := at[i]
		b.WriteString(text[last:pos])
		b.WriteString(e.text)
		last = pos
	}
	b.WriteString(text[last:])
	return b.String(), true
}

func currentTokens(text string, m Mode) []token {
	// A string is one token, as a `?` and a number are: a text of a
	// shape has a `?` where the client's text has a number or a string.
	l := &lexer{s: text, mode: m, strings: true}
	var toks []token
	for {
		t, ok := l.next()
		if !ok {
			return toks
		}
		toks = append(toks, t)
	}
}

// planCurrentRead finds and proves the edits that make text a current
// read.
func planCurrentRead(text string, m Mode) *currentPlan {
	text = strings.TrimRight(text, " \t\r\n;")
	stmts, err := ParseMode(text, m)
	if err != nil || len(stmts) != 1 {
		return notCurrent
	}
	switch stmts[0].(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
	default:
		return notCurrent
	}
	// The statement as it must read once edited: a share lock on every
	// block that reads a table without a locking clause.
	want := &blockLocker{}
	stmts[0].Accept(want)
	if want.refuse {
		return notCurrent
	}
	toks := currentTokens(text, m)
	if want.locked == 0 {
		return &currentPlan{ok: true, ntok: len(toks)}
	}
	wantSQL, err := RestoreMode(stmts[0], m)
	if err != nil {
		return notCurrent
	}
	e := &currentEditor{toks: toks, match: matchParens(toks)}
	if e.match == nil || !e.query(0, len(toks)) {
		return notCurrent
	}
	slices.SortStableFunc(e.edits, func(a, b currentEdit) int { return a.tok - b.tok })
	p := &currentPlan{ok: true, ntok: len(toks), edits: e.edits}
	edited, ok := p.apply(text, m)
	if !ok {
		return notCurrent
	}
	again, err := ParseMode(edited, m)
	if err != nil || len(again) != 1 {
		return notCurrent
	}
	got := &blockLocker{}
	again[0].Accept(got)
	if got.refuse || got.locked != 0 {
		return notCurrent // a block that reads a table still has no clause
	}
	gotSQL, err := RestoreMode(again[0], m)
	if err != nil || gotSQL != wantSQL {
		return notCurrent
	}
	return p
}

// blockLocker gives every query block that reads a table and has no
// locking clause a share lock, counting them (locked); refuse is set for
// a statement with INTO (the parser reads no clause after it, MariaDB
// does) or a TABLE statement.
type blockLocker struct {
	locked int
	refuse bool
	count  bool // only count, change nothing
}

func (v *blockLocker) Enter(n ast.Node) (ast.Node, bool) {
	switch n := n.(type) {
	case *ast.SetOprSelectList:
		// MariaDB takes the clause on a UNION branch only in
		// parentheses. (A list of one is a branch in parentheses
		// already: the parser's form of "(SELECT ...)".)
		for _, b := range n.Selects {
			if len(n.Selects) == 1 {
				break
			}
			if sel, ok := b.(*ast.SelectStmt); ok && needsClause(sel) && !v.count {
				sel.IsInBraces = true
			}
		}
	case *ast.SelectStmt:
		if n.SelectIntoOpt != nil {
			v.refuse = true
		}
		if n.Kind == ast.SelectStmtKindTable {
			v.refuse = true
			v.locked++ // TABLE t reads t, and takes no clause
		} else if needsClause(n) {
			if !v.count {
				n.LockInfo = &ast.SelectLockInfo{LockType: ast.SelectLockForShare}
			}
			v.locked++
		}
	}
	return n, false
}

// needsClause: sel is a query block that reads a table and has no
// locking clause.
func needsClause(sel *ast.SelectStmt) bool {
	return sel.Kind == ast.SelectStmtKindSelect && sel.From != nil &&
		(sel.LockInfo == nil || sel.LockInfo.LockType == ast.SelectLockNone)
}

func (v *blockLocker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// matchParens returns, for each '(' token, the index of its ')' (and the
// reverse); nil if they do not balance.
func matchParens(toks []token) []int {
	match := make([]int, len(toks))
	var open []int
	for i, t := range toks {
		match[i] = -1
		if !t.punct {
			continue
		}
		switch t.text {
		case "(":
			open = append(open, i)
		case ")":
			if len(open) == 0 {
				return nil
			}
			j := open[len(open)-1]
			open = open[:len(open)-1]
			match[i], match[j] = j, i
		}
	}
	if len(open) > 0 {
		return nil
	}
	return match
}

// currentEditor places the clauses on a statement's tokens. Its guesses
// need not be right: planCurrentRead proves or rejects what it places.
type currentEditor struct {
	toks  []token
	match []int
	edits []currentEdit
}

func (e *currentEditor) word(i int, w string) bool {
	if i >= len(e.toks) {
		return false
	}
	t := e.toks[i]
	return !t.punct && !t.quoted && !t.str && strings.EqualFold(t.text, w)
}

func (e *currentEditor) punct(i int, p string) bool {
	return i < len(e.toks) && e.toks[i].punct && e.toks[i].text == p
}

// skip returns the index after the token at i, past a whole parenthesized
// group if it opens one.
func (e *currentEditor) skip(i int) int {
	if e.punct(i, "(") {
		return e.match[i] + 1
	}
	return i + 1
}

// has reports whether the tokens [lo, hi) hold word w outside
// parentheses, followed by next if next is not "".
func (e *currentEditor) has(lo, hi int, w, next string) bool {
	for i := lo; i < hi; i = e.skip(i) {
		if e.word(i, w) && (next == "" || e.word(i+1, next)) {
			return true
		}
	}
	return false
}

// query places the clauses of the query expression in tokens [lo, hi):
// a whole statement, or what a pair of parentheses holds. ok is false
// where it cannot tell its shape.
func (e *currentEditor) query(lo, hi int) bool {
	i := lo
	if e.word(i, "WITH") {
		i++
		if e.word(i, "RECURSIVE") {
			i++
		}
		for {
			if i >= hi || e.toks[i].punct {
				return false
			}
			i++ // the CTE's name
			if e.punct(i, "(") {
				i = e.match[i] + 1 // its column list
			}
			if !e.word(i, "AS") || !e.punct(i+1, "(") {
				return false
			}
			open := i + 1
			if !e.query(open+1, e.match[open]) {
				return false
			}
			i = e.match[open] + 1
			if !e.punct(i, ",") {
				break
			}
			i++
		}
	}
	// The branches of a UNION, EXCEPT or INTERSECT, split where such a
	// word stands outside parentheses.
	var branches [][2]int
	start := i
	for j := i; j < hi; {
		if e.word(j, "UNION") || e.word(j, "EXCEPT") || e.word(j, "INTERSECT") {
			branches = append(branches, [2]int{start, j})
			j++
			if e.word(j, "ALL") || e.word(j, "DISTINCT") {
				j++
			}
			start = j
			continue
		}
		j = e.skip(j)
	}
	branches = append(branches, [2]int{start, hi})
	if len(branches) == 1 {
		return e.block(start, hi, hi, false)
	}
	for k, br := range branches {
		end := br[1]
		if k == len(branches)-1 {
			// The last branch ends where the clauses of the whole
			// UNION begin, unless it is one group in parentheses.
			end = e.branchEnd(br[0], br[1])
		}
		if !e.block(br[0], end, end, true) {
			return false
		}
	}
	return true
}

// branchEnd returns where the last branch of a UNION, starting at lo,
// ends: after its parentheses if it is in them, else before an ORDER BY,
// LIMIT or INTO that belongs to the whole UNION.
func (e *currentEditor) branchEnd(lo, hi int) int {
	if e.punct(lo, "(") {
		return e.match[lo] + 1
	}
	for i := lo; i < hi; i = e.skip(i) {
		if e.word(i, "ORDER") || e.word(i, "LIMIT") || e.word(i, "INTO") {
			return i
		}
	}
	return hi
}

// block places the clause of the query block in tokens [lo, hi), one
// branch of a query expression; the clause goes before token at. A block
// that is one group in parentheses is a query expression of its own; a
// UNION branch (branch) is wrapped in parentheses.
func (e *currentEditor) block(lo, hi, at int, branch bool) bool {
	if lo >= hi {
		return false
	}
	if e.punct(lo, "(") && e.match[lo]+1 == hi {
		return e.query(lo+1, e.match[lo])
	}
	if !e.groups(lo, hi) {
		return false
	}
	if !e.word(lo, "SELECT") {
		return !e.has(lo, hi, "FROM", "") // VALUES and the like read no table
	}
	if !e.has(lo, hi, "FROM", "") || e.has(lo, hi, "FOR", "UPDATE") || e.has(lo, hi, "LOCK", "IN") {
		return true
	}
	if branch {
		e.edits = append(e.edits, currentEdit{lo, "("}, currentEdit{at, CurrentReadClause + ")"})
	} else {
		e.edits = append(e.edits, currentEdit{at, CurrentReadClause})
	}
	return true
}

// groups places the clauses of the queries in the parenthesized groups
// of tokens [lo, hi): subqueries, derived tables, and groups holding them.
func (e *currentEditor) groups(lo, hi int) bool {
	for i := lo; i < hi; i++ {
		if !e.punct(i, "(") {
			continue
		}
		end := e.match[i]
		if e.word(i+1, "SELECT") || e.word(i+1, "WITH") {
			if !e.query(i+1, end) {
				return false
			}
		} else if !e.groups(i+1, end) {
			return false
		}
		i = end
	}
	return true
}
