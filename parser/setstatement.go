package parser

import "strings"

// MariaDB's SET STATEMENT var = value [, var = value ...] FOR statement
// runs one statement with session variables set for it alone (MariaDB
// Connector/Node sends its query timeouts so: max_statement_time). The
// TiDB parser does not know the form. lockproxy reads the statement after
// FOR as itself, keys and locks it as it would the statement alone, when
// every variable set is one that changes neither which rows a statement
// names nor how values compare (statementScoped) and each value is a
// literal; the statement is then Wrapped, and lockproxy sends nothing of
// its own in its place (no rewrite, fence, current read or combined
// batch), since the client's prefix must stay with it. Any other SET
// STATEMENT is a text the parser rejects, as before.

// statementScoped are the variables a SET STATEMENT may set for a
// statement lockproxy still reads as itself: timeouts, the optimizer's
// choices, buffer sizes and limits on what runs or is returned. None
// changes how the text reads (sql_mode and the character sets would), which
// rows a WHERE names, or how values compare (collations, time_zone).
var statementScoped = map[string]bool{
	"max_statement_time": true, "innodb_lock_wait_timeout": true, "lock_wait_timeout": true,
	"optimizer_switch": true, "optimizer_search_depth": true, "optimizer_prune_level": true,
	"join_buffer_size": true, "join_cache_level": true, "sort_buffer_size": true,
	"tmp_table_size": true, "tmp_memory_table_size": true, "max_heap_table_size": true,
	"net_read_timeout": true, "net_write_timeout": true, "long_query_time": true,
	"big_tables": true, "max_join_size": true, "sql_select_limit": true,
}

// setStatementPrefix reads SET STATEMENT ... FOR at the start of text,
// read under o, and returns where the statement it runs starts; ok is
// false when text does not start so, or sets a variable outside
// statementScoped, or a value that is not a literal (a word, a number, a
// string, signed or dotted).
func setStatementPrefix(text string, o ScanOptions) (inner int, ok bool) {
	if !containsFold(text, "statement") {
		return 0, false
	}
	sc := NewScanner(text, o)
	next := func() (Token, bool) {
		for {
			t, ok := sc.Next()
			if !ok || t.Kind != TokenSpace && t.Kind != TokenComment {
				return t, ok
			}
		}
	}
	word := func(t Token, w string) bool {
		return t.Kind == TokenWord && strings.EqualFold(text[t.Start:t.End], w)
	}
	if t, ok := next(); !ok || !word(t, "set") {
		return 0, false
	}
	if t, ok := next(); !ok || !word(t, "statement") {
		return 0, false
	}
	for {
		name, ok := next()
		if !ok || name.Kind != TokenWord || !statementScoped[strings.ToLower(text[name.Start:name.End])] {
			return 0, false
		}
		if t, ok := next(); !ok || t.Kind != TokenPunct || text[t.Start] != '=' {
			return 0, false
		}
		values := 0
		for {
			t, ok := next()
			switch {
			case !ok:
				return 0, false
			case values > 0 && word(t, "for"):
				return t.End, true
			case values > 0 && t.Kind == TokenPunct && text[t.Start] == ',':
			case t.Kind == TokenWord || t.Kind == TokenString:
				values++
				continue
			case t.Kind == TokenPunct && strings.IndexByte(".+-", text[t.Start]) >= 0:
				continue
			default:
				return 0, false
			}
			break // a ',': the next variable
		}
	}
}
