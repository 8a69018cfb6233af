package parser

import (
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
// Safe for concurrent use.
func ReplaceConnectionID(sql string, id uint32) (string, bool) {
	if !containsFold(sql, "connection_id") {
		return sql, false // fast path
	}
	if k := LexKind(sql); k == KindDDL {
		return sql, false
	}
	toks := positions(sql)
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
		if t.punct || t.quoted || w != "connection_id" || i+2 >= len(toks) ||
			toks[i+1].text != "(" || toks[i+2].text != ")" || (i > 0 && toks[i-1].text == ".") {
			continue
		}
		end := toks[i+2].end
		b.WriteString(sql[last:t.start])
		b.WriteString(strconv.FormatUint(uint64(id), 10))
		if selectList[depth] && i > 0 && startsSelectItem(toks[i-1]) && endsSelectItem(toks, i+3) {
			b.WriteString(" AS `" + strings.ReplaceAll(sql[t.start:end], "`", "``") + "`")
		}
		last = end
		i += 2
	}
	if last == 0 {
		return sql, false
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

// posToken is a token with its byte span in the text.
type posToken struct {
	token
	start, end int
}

// positions lexes sql into tokens with their spans.
func positions(sql string) []posToken {
	l := lexer{s: sql}
	var out []posToken
	for {
		t, ok := l.next()
		if !ok {
			return out
		}
		start := l.i - len(t.text)
		if t.quoted {
			start = strings.LastIndexByte(sql[:l.i-1], '`') // approximate: never replaced
		}
		out = append(out, posToken{token: t, start: start, end: l.i})
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
