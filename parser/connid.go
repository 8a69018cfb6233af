package parser

import (
	"fmt"
	"strconv"
	"strings"
)

// ReplaceConnectionID returns sql with every call of CONNECTION_ID()
// replaced by id, the connection id the client was greeted with, and
// whether it replaced any. A call that is a whole item of a select list
// without an alias keeps its column name (`CONNECTION_ID()` AS
// `CONNECTION_ID()`), as MariaDB names the column by the text. Calls inside
// string literals, comments and quoted identifiers are left alone, and so
// is the text of CREATE and ALTER statements, whose routine bodies, view
// definitions and defaults must keep the call for whoever runs them later.
// The text is read as the session's server reads it (o: its sql_mode,
// character set and version); under a sql_mode lockproxy cannot read with
// certainty nothing is replaced, so no literal is ever changed. Safe for
// concurrent use.
func ReplaceConnectionID(sql string, id uint32, o ScanOptions) (string, bool) {
	text := strconv.FormatUint(uint64(id), 10)
	return replaceCalls(sql, "connection_id", o, func(call string, args bool) (string, bool) {
		return text, !args
	})
}

// ReplaceUsedLock returns sql with every call of IS_USED_LOCK(name) made
// to answer id, the connection id the client was greeted with, where
// MariaDB answers thread, the thread id of the connection the statement
// runs on (the lock is the session's own); other answers (another
// session's thread id, NULL) are left as they are. It is the companion of
// ReplaceConnectionID, so that `IS_USED_LOCK(name) = CONNECTION_ID()`
// holds for a lock the session took. The call stays one call (its
// argument may be a placeholder, whose count must not change), its answer
// mapped through text: the column is a BIGINT, where MariaDB's is an INT
// too narrow for lockproxy's ids. Column names, string literals, comments, quoted identifiers and
// CREATE and ALTER are treated as ReplaceConnectionID treats them. Safe
// for concurrent use.
func ReplaceUsedLock(sql string, thread, id uint32, o ScanOptions) (string, bool) {
	return replaceCalls(sql, "is_used_lock", o, func(call string, args bool) (string, bool) {
		if !args {
			return "", false
		}
		return fmt.Sprintf("CAST(TRIM(BOTH '#' FROM REPLACE(CONCAT('#', %s, '#'), '#%d#', '%d')) AS SIGNED)", call, thread, id), true
	})
}

// replaceCalls returns sql with every call of the function name (lower
// case) replaced by what with gives for the call's text (args: it has
// arguments); with's false leaves the call as it is.
func replaceCalls(sql, name string, o ScanOptions, with func(call string, args bool) (string, bool)) (string, bool) {
	if !containsFold(sql, name) {
		return sql, false // fast path
	}
	if o.Mode.uncertain() != "" {
		return sql, false
	}
	if k := lexKind(sql, o.Mode); k == KindDDL {
		return sql, false
	}
	toks := positions(sql, o)
	var b strings.Builder
	last := 0
	selectList := map[int]bool{} // paren depth -> inside a select list there
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		w := strings.ToLower(t.text)
		switch {
		case t.punct && t.text == "(":
			depth++
			continue
		case t.punct && t.text == ")":
			selectList[depth] = false
			depth--
			continue
		case t.punct && t.text == ";":
			selectList[depth] = false
			continue
		case !t.punct && !t.quoted && w == "select":
			selectList[depth] = true
			continue
		case !t.punct && !t.quoted && clauseAfterSelectList[w]:
			selectList[depth] = false
			continue
		}
		if t.punct || t.quoted || w != name || i+2 >= len(toks) || toks[i+1].text != "(" || (i > 0 && toks[i-1].text == ".") {
			continue
		}
		closing := closingParen(toks, i+1)
		if closing < 0 {
			continue
		}
		end := toks[closing].end
		args := closing > i+2
		repl, ok := with(sql[t.start:end], args)
		if !ok {
			continue
		}
		b.WriteString(sql[last:t.start])
		b.WriteString(repl)
		if selectList[depth] && i > 0 && startsSelectItem(toks[i-1]) && endsSelectItem(toks, closing+1) {
			b.WriteString(" AS `" + strings.ReplaceAll(sql[t.start:end], "`", "``") + "`")
		}
		last = end
		i = closing
	}
	if last == 0 {
		return sql, false
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

// closingParen returns the index of the token closing the parenthesis
// opened at toks[open]; -1 when the text ends first.
func closingParen(toks []posToken, open int) int {
	depth := 0
	for j := open; j < len(toks); j++ {
		switch {
		case !toks[j].punct:
		case toks[j].text == "(":
			depth++
		case toks[j].text == ")":
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// posToken is a token with its byte span in the text.
type posToken struct {
	token
	start, end int
}

// positions lexes sql, read under o, into tokens with their spans, string
// literals included (an argument, or a column alias).
func positions(sql string, o ScanOptions) []posToken {
	l := lexer{s: sql, strings: true, mode: o.Mode, charset: o.Charset, version: o.ServerVersion}
	var out []posToken
	for {
		t, ok := l.next()
		if !ok {
			return out
		}
		out = append(out, posToken{token: t, start: t.pos, end: l.i})
	}
}

// clauseAfterSelectList are the words that end a select list.
var clauseAfterSelectList = map[string]bool{"from": true, "into": true, "where": true, "group": true,
	"having": true, "order": true, "limit": true, "union": true, "except": true, "intersect": true,
	"window": true, "for": true, "lock": true, "procedure": true}

// startsSelectItem: the token before an expression that is a whole select
// item.
func startsSelectItem(prev posToken) bool {
	if prev.punct {
		return prev.text == ","
	}
	switch strings.ToLower(prev.text) {
	case "select", "distinct", "all", "distinctrow", "high_priority", "straight_join", "sql_small_result",
		"sql_big_result", "sql_buffer_result", "sql_cache", "sql_no_cache", "sql_calc_found_rows":
		return !prev.quoted
	}
	return false
}

// endsSelectItem: the token at i (if any) ends the select item before it
// without giving it an alias.
func endsSelectItem(toks []posToken, i int) bool {
	if i >= len(toks) {
		return true
	}
	t := toks[i]
	if t.punct {
		return t.text == "," || t.text == ";" || t.text == ")"
	}
	return !t.quoted && clauseAfterSelectList[strings.ToLower(t.text)]
}

// NamesConnectionCalls reports whether text may call CONNECTION_ID() or
// IS_USED_LOCK() (the names appear anywhere, in any case): the cheap test
// before ReplaceConnectionID and ReplaceUsedLock read it.
func NamesConnectionCalls(text []byte) bool {
	s := string(text)
	return containsFold(s, "connection_id") || containsFold(s, "is_used_lock")
}
