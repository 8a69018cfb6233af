package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// diagnosticVars are the session variables that read the diagnostics
// area: the warnings and errors of the session's previous statement.
var diagnosticVars = map[string]bool{"warning_count": true, "error_count": true}

// diagnostics reports whether stmt only reads the diagnostics area of the
// session's previous statement: SHOW WARNINGS, SHOW ERRORS (with LIMIT or
// COUNT(*)), or a SELECT with no table of nothing but @@warning_count and
// @@error_count. Its answer depends on the server that ran the previous
// statement, so it must go there.
func diagnostics(stmt ast.StmtNode) bool {
	switch x := stmt.(type) {
	case *ast.ShowStmt:
		return x.Tp == ast.ShowWarnings || x.Tp == ast.ShowErrors
	case *ast.SelectStmt:
		if x.From != nil || x.Where != nil || x.GroupBy != nil || x.Having != nil || x.OrderBy != nil ||
			x.Limit != nil || x.With != nil || x.SelectIntoOpt != nil || x.LockInfo != nil ||
			x.Fields == nil || len(x.Fields.Fields) == 0 {
			return false
		}
		for _, fl := range x.Fields.Fields {
			v, ok := fl.Expr.(*ast.VariableExpr)
			if !ok || !v.IsSystem || v.IsGlobal || v.IsInstance || !diagnosticVars[strings.ToLower(v.Name)] {
				return false
			}
		}
		return true
	}
	return false
}

// ShowDiagnostics reports whether text, which the TiDB parser may reject,
// is SHOW WARNINGS or SHOW ERRORS with a LIMIT (LIMIT n, LIMIT m, n or
// LIMIT n OFFSET m, a number or a placeholder each): a statement that only
// reads the diagnostics area.
func ShowDiagnostics(text string, m Mode) bool {
	l := lexer{s: text, strings: true, mode: m}
	want := []func(token) bool{word("show"), oneOf(word("warnings"), word("errors"))}
	rest := [][]func(token) bool{
		nil,
		{word("limit"), count},
		{word("limit"), count, punct(","), count},
		{word("limit"), count, word("offset"), count},
	}
	var toks []token
	for {
		t, ok := l.next()
		if !ok {
			break
		}
		toks = append(toks, t)
	}
	if n := len(toks); n > 0 && toks[n-1].punct && toks[n-1].text == ";" {
		toks = toks[:n-1]
	}
	for _, r := range rest {
		if matchTokens(toks, append(append([]func(token) bool(nil), want...), r...)) {
			return true
		}
	}
	return false
}

// ReadsDiagnostics reports whether text, which the TiDB parser may reject,
// may read the diagnostics area of the session's previous statement: it
// names @@warning_count or @@error_count (also as @@session. or @@local.),
// or holds GET [CURRENT | STACKED] DIAGNOSTICS, SHOW WARNINGS or SHOW
// ERRORS, outside strings and comments (executable comments count).
func ReadsDiagnostics(text string, m Mode) bool {
	l := lexer{s: text, strings: true, mode: m}
	var prev [2]token // the two tokens before t, nearest first
	for {
		t, ok := l.next()
		if !ok {
			return false
		}
		if !t.punct && !t.quoted && !t.str {
			w := strings.ToLower(t.text)
			switch {
			case w == "@@warning_count" || w == "@@error_count":
				return true
			case diagnosticVars[w] && prev[0].punct && prev[0].text == "." &&
				oneOf(word("@@session"), word("@@local"))(prev[1]):
				return true
			case w == "diagnostics" && (word("get")(prev[0]) ||
				oneOf(word("current"), word("stacked"))(prev[0]) && word("get")(prev[1])):
				return true
			case (w == "warnings" || w == "errors") && word("show")(prev[0]):
				return true
			}
		}
		prev[0], prev[1] = t, prev[0]
	}
}

func matchTokens(toks []token, pattern []func(token) bool) bool {
	if len(toks) != len(pattern) {
		return false
	}
	for i, t := range toks {
		if !pattern[i](t) {
			return false
		}
	}
	return true
}

func word(w string) func(token) bool {
	return func(t token) bool { return !t.punct && !t.quoted && !t.str && strings.EqualFold(t.text, w) }
}

func punct(p string) func(token) bool {
	return func(t token) bool { return t.punct && t.text == p }
}

func oneOf(a, b func(token) bool) func(token) bool {
	return func(t token) bool { return a(t) || b(t) }
}

// count is a LIMIT's number: digits, or a placeholder.
func count(t token) bool {
	if t.punct {
		return t.text == "?"
	}
	if t.quoted || t.str || t.text == "" {
		return false
	}
	for i := 0; i < len(t.text); i++ {
		if t.text[i] < '0' || t.text[i] > '9' {
			return false
		}
	}
	return true
}
