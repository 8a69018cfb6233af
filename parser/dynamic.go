package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Immediate is MariaDB's EXECUTE IMMEDIATE expr [USING ...], which the TiDB
// grammar lacks: the statement text is an expression evaluated by the
// server, so lockproxy knows it only when it is a string literal or a user
// variable whose value the session tracks.
type Immediate struct {
	// SQL is the statement text when expr is a string literal.
	SQL string
	// FromVar is the user variable when expr is @var, lowercased.
	FromVar string
	// Using are the user variables of USING, lowercased.
	Using []string
	// UsingOther is true when USING lists anything but user variables
	// (literals, expressions): their values are not tracked.
	UsingOther bool
}

// Known reports whether the statement text is a literal or a variable.
func (im Immediate) Known() bool { return im.SQL != "" || im.FromVar != "" }

// ParseExecuteImmediate reads sql as EXECUTE IMMEDIATE under sql_mode m;
// ok is false when sql is not one. A text whose expression is neither a
// string literal nor a user variable gives ok with Known() false.
func ParseExecuteImmediate(sql string, m Mode) (im Immediate, ok bool) {
	l := lexer{s: sql, mode: m}
	first, ok1 := l.next()
	second, ok2 := l.next()
	if !ok1 || !ok2 || first.punct || first.quoted || second.punct || second.quoted ||
		!strings.EqualFold(first.text, "execute") || !strings.EqualFold(second.text, "immediate") {
		return Immediate{}, false
	}
	rest := sql[l.i:]
	if hasComment(rest, m) {
		// A comment MariaDB may run (/*M! 'x' */ 'y' is the string 'xy')
		// or skip: lockproxy does not read such a text as the server
		// would, so its statement is not known.
		return Immediate{}, true
	}
	expr, using := rest, ""
	rl := lexer{s: rest, mode: m}
	for {
		t, more := rl.next()
		if !more {
			break
		}
		if !t.punct && !t.quoted && strings.EqualFold(t.text, "using") {
			expr, using = rest[:rl.i-len(t.text)], rest[rl.i:]
			break
		}
	}
	// The expression forms PREPARE accepts are the ones lockproxy can
	// know: parse them as PREPARE does.
	if stmts, err := parse("PREPARE lockproxy_immediate FROM "+expr, m); err == nil && len(stmts) == 1 {
		if p, isPrep := stmts[0].(*ast.PrepareStmt); isPrep {
			if p.SQLVar != nil {
				im.FromVar = strings.ToLower(p.SQLVar.Name)
			} else {
				im.SQL = p.SQLText
			}
		}
	}
	if using != "" {
		stmts, err := parse("EXECUTE lockproxy_immediate USING "+using, m)
		ex, isExec := firstExecute(stmts)
		if err != nil || !isExec {
			// USING lists expressions, or more text follows (another
			// statement after a ';'): the text is not one EXECUTE
			// IMMEDIATE lockproxy can read whole.
			return Immediate{}, true
		}
		for _, u := range ex.UsingVars {
			v, isVar := u.(*ast.VariableExpr)
			if !isVar || v.IsSystem {
				im.UsingOther = true
				continue
			}
			im.Using = append(im.Using, strings.ToLower(v.Name))
		}
	}
	return im, true
}

func firstExecute(stmts []ast.StmtNode) (*ast.ExecuteStmt, bool) {
	if len(stmts) != 1 {
		return nil, false
	}
	ex, ok := stmts[0].(*ast.ExecuteStmt)
	return ex, ok
}

// HasDynamicSQL reports whether sql holds, outside string literals and
// comments (executable comments included as text), a word that runs a
// statement lockproxy cannot see by itself: EXECUTE, CALL or PREPARE. It
// is the conservative test for text the parser rejected: the word counts
// when any reading of the text has it outside a literal (EveryReading),
// whatever the session's sql_mode and character set.
func HasDynamicSQL(sql string) bool {
	for _, o := range EveryReading(sql) {
		l := lexer{s: sql, mode: o.Mode, charset: o.Charset}
		for {
			t, ok := l.next()
			if !ok {
				break
			}
			if t.punct || t.quoted {
				continue
			}
			switch strings.ToLower(t.text) {
			case "execute", "call", "prepare":
				return true
			}
		}
	}
	return false
}

// hasComment reports whether text, read under sql_mode m, holds a comment
// of any form.
func hasComment(text string, m Mode) bool {
	sc := NewScanner(text, ScanOptions{Mode: m})
	for {
		t, ok := sc.Next()
		if !ok {
			return false
		}
		switch t.Kind {
		case TokenComment, TokenExecStart, TokenExecEnd:
			return true
		}
	}
}
