package parser

import (
	"strings"
)

// token is one lexical token of the cheap scanner: a word (keyword or
// identifier, quoted or not), or a single punctuation byte.
type token struct {
	text   string // identifier text (unquoted) or punctuation
	quoted bool   // back-quoted identifier
	punct  bool
	pos    int  // offset of the token's first byte in the text
	str    bool // a string literal (only from a lexer with strings set)
}

// lexer is a cheap, forgiving MySQL tokenizer for text the TiDB parser
// rejected. It skips string literals and comments (noting the routing hint
// in comments) and keeps the content of /*! ... */ version comments.
type lexer struct {
	s    string
	i    int
	hint bool
	// ansiQuotes: "x" is an identifier, as under sql_mode ANSI_QUOTES.
	ansiQuotes bool
	// strings: a string literal is a token (str), not skipped.
	strings bool
}

const hintWord = "lockproxy:primary"

// next returns the next token; ok is false at the end of the text.
func (l *lexer) next() (token, bool) {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.i++
		case c == '#' || (c == '-' && strings.HasPrefix(l.s[l.i:], "--") &&
			(l.i+2 == len(l.s) || isSpace(l.s[l.i+2]))):
			l.lineComment()
		case c == '/' && strings.HasPrefix(l.s[l.i:], "/*!"):
			l.i += 3
			for l.i < len(l.s) && l.s[l.i] >= '0' && l.s[l.i] <= '9' {
				l.i++
			}
		case c == '/' && strings.HasPrefix(l.s[l.i:], "/*"):
			l.blockComment()
		case c == '*' && strings.HasPrefix(l.s[l.i:], "*/"):
			l.i += 2 // end of a /*! ... */ version comment
		case c == '"' && l.ansiQuotes:
			pos := l.i
			return token{text: l.quotedIdent('"'), quoted: true, pos: pos}, true
		case c == '\'' || c == '"':
			pos := l.i
			l.skipQuoted(c)
			if l.strings {
				return token{text: l.s[pos:l.i], str: true, pos: pos}, true
			}
		case c == '`':
			pos := l.i
			return token{text: l.quotedIdent('`'), quoted: true, pos: pos}, true
		case isWordByte(c):
			start := l.i
			for l.i < len(l.s) && isWordByte(l.s[l.i]) {
				l.i++
			}
			return token{text: l.s[start:l.i], pos: start}, true
		default:
			l.i++
			return token{text: string(c), punct: true, pos: l.i - 1}, true
		}
	}
	return token{}, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isWordByte: identifiers may hold letters, digits, '_', '$', '@' (user
// variables stay one word) and any byte >= 0x80.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '$' || c == '@' || c >= 0x80
}

func (l *lexer) noteComment(body string) {
	if !l.hint && containsFold(body, hintWord) {
		l.hint = true
	}
}

func (l *lexer) lineComment() {
	end := strings.IndexByte(l.s[l.i:], '\n')
	if end < 0 {
		end = len(l.s) - l.i
	}
	l.noteComment(l.s[l.i : l.i+end])
	l.i += end
}

func (l *lexer) blockComment() {
	end := strings.Index(l.s[l.i+2:], "*/")
	if end < 0 {
		l.noteComment(l.s[l.i:])
		l.i = len(l.s)
		return
	}
	l.noteComment(l.s[l.i+2 : l.i+2+end])
	l.i += end + 4
}

// skipQuoted skips a string literal quoted by q (a doubled quote or a
// backslash escapes it).
func (l *lexer) skipQuoted(q byte) {
	l.i++
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '\\':
			l.i += 2
		case c == q && l.i+1 < len(l.s) && l.s[l.i+1] == q:
			l.i += 2
		case c == q:
			l.i++
			return
		default:
			l.i++
		}
	}
}

// quotedIdent reads an identifier quoted by q, a back quote (or, under
// ANSI_QUOTES, a double quote); a doubled quote stands for one.
func (l *lexer) quotedIdent(q byte) string {
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		if c == q {
			if l.i+1 < len(l.s) && l.s[l.i+1] == q {
				b.WriteByte(q)
				l.i += 2
				continue
			}
			l.i++
			break
		}
		b.WriteByte(c)
		l.i++
	}
	return b.String()
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lowerByte(s[i+j]) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// HasPrimaryHint reports whether a comment of sql (not a string literal)
// contains `lockproxy:primary`, as in /* lockproxy:primary */. The TiDB
// parser drops comments, so this is lexical. Safe for concurrent use.
func HasPrimaryHint(sql string) bool {
	if !containsFold(sql, hintWord) {
		return false // fast path: most statements carry no hint
	}
	l := lexer{s: sql}
	for {
		if _, ok := l.next(); !ok {
			return l.hint
		}
		if l.hint {
			return true
		}
	}
}
