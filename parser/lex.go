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
// rejected, on top of the Scanner: it skips blanks, string literals and
// comments (noting the routing hint in comments) and keeps the content of
// executable comments (of any version: the lexer is not told the
// server's). A word holds '@' too, so user variables stay one word.
type lexer struct {
	s    string
	i    int
	hint bool
	// mode: the sql_mode the text is read under.
	mode Mode
	// strings: a string literal is a token (str), not skipped.
	strings bool
	// charset and version are the connection's character_set_client and
	// the server's version (ScanOptions): "" and 0 read bytes alone and
	// run every executable comment.
	charset string
	version int
	sc      Scanner
	started bool
}

const hintWord = "lockproxy:primary"

// next returns the next token; ok is false at the end of the text.
func (l *lexer) next() (token, bool) {
	if !l.started {
		l.sc, l.started = NewScanner(l.s, ScanOptions{Mode: l.mode, Charset: l.charset, ServerVersion: l.version}), true
	}
	for {
		t, ok := l.scan()
		if !ok {
			return token{}, false
		}
		text := l.s[t.Start:t.End]
		switch t.Kind {
		case TokenSpace, TokenExecStart, TokenExecEnd:
		case TokenComment:
			l.noteComment(text)
		case TokenString:
			if l.strings {
				return token{text: text, str: true, pos: t.Start}, true
			}
		case TokenQuotedName:
			return token{text: unquoteName(text), quoted: true, pos: t.Start}, true
		case TokenWord:
			l.word()
			return token{text: l.s[t.Start:l.i], pos: t.Start}, true
		default:
			switch {
			case text == "*" && l.i < len(l.s) && l.s[l.i] == '/':
				l.i++ // the end of an executable comment, whatever its start
			case text == "@":
				l.word()
				return token{text: l.s[t.Start:l.i], pos: t.Start}, true
			default:
				return token{text: text, punct: true, pos: t.Start}, true
			}
		}
	}
}

// scan returns the scanner's next token from l.i (which callers may have
// moved back).
func (l *lexer) scan() (Token, bool) {
	if l.sc.i != l.i {
		l.sc.i, l.sc.hex = l.i, false
	}
	t, ok := l.sc.Next()
	l.i = l.sc.i
	return t, ok
}

// word extends the word or '@' before l.i over the words and '@' bytes
// right after it.
func (l *lexer) word() {
	for l.i < len(l.s) && (isWordByte(l.s[l.i]) || l.s[l.i] == '@') {
		l.scan()
	}
}

// unquoteName is the name a quoted name token stands for: without its
// quotes, a doubled quote read as one.
func unquoteName(tok string) string {
	q := tok[:1]
	body := tok[1:]
	if strings.HasSuffix(body, q) && len(body) > 0 {
		body = body[:len(body)-1]
	}
	return strings.ReplaceAll(body, q+q, q)
}

func isSpace(c byte) bool { return isBlank(c) }

// isWordByte: identifiers may hold letters, digits, '_', '$', '@' (user
// variables stay one word) and any byte >= 0x80.
func isWordByte(c byte) bool { return IsWordByte(c) || c == '@' }

func (l *lexer) noteComment(body string) {
	if !l.hint && containsFold(body, hintWord) {
		l.hint = true
	}
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
func HasPrimaryHint(sql string) bool { return hasPrimaryHint(sql, 0) }

// hasPrimaryHint is HasPrimaryHint of sql read under sql_mode m.
func hasPrimaryHint(sql string, m Mode) bool {
	if !containsFold(sql, hintWord) {
		return false // fast path: most statements carry no hint
	}
	l := lexer{s: sql, mode: m}
	for {
		if _, ok := l.next(); !ok {
			return l.hint
		}
		if l.hint {
			return true
		}
	}
}

// multiByteCharsets are the client character sets in which a byte of a
// multi-byte character may be a backslash or a back quote (ScanOptions).
var multiByteCharsets = []string{"big5", "cp932", "gbk", "sjis", "gb18030"}

// EveryReading lists the ways a server may read text, for scans that must
// hold whatever the session's state: the sql_modes that move where strings
// and names end (NO_BACKSLASH_ESCAPES, ANSI_QUOTES) and the character sets
// whose multi-byte characters may end in a backslash. Only readings the
// text's bytes can tell apart are listed: one for text without a
// backslash, a double quote or a byte above 0x7f.
func EveryReading(text string) []ScanOptions {
	modes := []Mode{0}
	if strings.IndexByte(text, '\\') >= 0 {
		modes = append(modes, ModeNoBackslashEscapes)
	}
	if strings.IndexByte(text, '"') >= 0 {
		for _, m := range modes {
			modes = append(modes, m|ModeANSIQuotes)
		}
	}
	charsets := []string{""}
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			charsets = append(charsets, multiByteCharsets...)
			break
		}
	}
	out := make([]ScanOptions, 0, len(modes)*len(charsets))
	for _, m := range modes {
		for _, cs := range charsets {
			out = append(out, ScanOptions{Mode: m, Charset: cs})
		}
	}
	return out
}
