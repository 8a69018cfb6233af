package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// KillCut returns where to cut a text of several statements so that a
// KILL among them stands alone: after the KILL when it comes first and
// more statements follow, else where the statement before the first KILL
// ends (after its ";"); after a KILL's ";" that only a comment follows,
// since MariaDB runs the comment as a statement of its own. It returns 0
// when the text needs no cut: a single statement, or none is a KILL. A proxy that gives its clients ids of its
// own serves each piece in turn, so that every KILL is one it can
// translate. The statements are the TiDB parser's; for a text it rejects
// (MariaDB's KILL HARD | SOFT, ...) a lexical scan splits at each ";"
// outside literals and comments, unless a statement starts with CREATE
// (a routine's body holds ";" of its own): such a text is not cut. The
// text is read under o, as the session's server reads it (its sql_mode,
// character set and version: NO_BACKSLASH_ESCAPES and a gbk character
// ending in 0x5c decide where a string ends).
func KillCut(sql string, o ScanOptions) int {
	if !containsFold(sql, "kill") {
		return 0
	}
	var starts, ends []int // each statement's first byte and end (after its ";")
	var kill []bool
	if stmts, err := ParseMode(sql, o.Mode); err == nil && RewriteSafeCharset(o.Charset) {
		end := 0
		for _, st := range stmts {
			text := st.Text()
			at := strings.Index(sql[end:], text)
			if at < 0 {
				return 0
			}
			starts = append(starts, end+at)
			end += at + len(text)
			ends = append(ends, end)
			_, isKill := st.(*ast.KillStmt)
			kill = append(kill, isKill)
		}
	} else {
		l := lexer{s: sql, mode: o.Mode, charset: o.Charset, version: o.ServerVersion}
		first := true
		for {
			t, ok := l.next()
			if !ok {
				break
			}
			if t.punct && t.text == ";" {
				if !first {
					ends[len(ends)-1] = t.pos + 1
				}
				first = true
				continue
			}
			if first {
				word := strings.ToLower(t.text)
				if !t.punct && !t.quoted && word == "create" {
					return 0
				}
				starts = append(starts, t.pos)
				ends = append(ends, len(sql))
				kill = append(kill, !t.punct && !t.quoted && word == "kill")
				first = false
			}
		}
	}
	if len(starts) == 1 && kill[0] && tailAfter(sql, ends[0], o.Charset) {
		// A KILL ended by ';' that a comment follows: MariaDB runs the
		// comment as a statement of its own (an empty one, answered
		// OK), so the comment is sent on, after the KILL.
		return ends[0]
	}
	if len(starts) < 2 {
		return 0
	}
	for i, k := range kill {
		switch {
		case !k:
		case i == 0:
			return ends[0]
		default:
			return ends[i-1]
		}
	}
	return 0
}

// tailAfter reports whether the statement of sql ending at end ends with
// ';' and text other than white space follows it (a comment): MariaDB
// then runs what follows as a statement of its own. White space after
// the last ';' is skipped, as MariaDB skips it (my_isspace, with the
// character set's own blank: BlankByte).
func tailAfter(sql string, end int, charset string) bool {
	head := strings.TrimRightFunc(sql[:end], func(r rune) bool { return r < 0x80 && isBlank(byte(r)) })
	if !strings.HasSuffix(head, ";") {
		return false
	}
	blank := BlankByte(charset)
	for i := end; i < len(sql); i++ {
		if c := sql[i]; !isBlank(c) && (blank == 0 || c != blank) {
			return true
		}
	}
	return false
}
