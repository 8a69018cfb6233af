package parser

import "strings"

// The one SQL scanner. Every lexical reading lockproxy makes of a
// statement text (expansion of executable comments, shapes, the cheap
// lexer of texts the parser rejected, connection-id replacement,
// admission's nesting and literal counts) walks the text with a Scanner,
// so quotes, escapes, comments and multi-byte characters are read one way,
// MariaDB's: lex_one_token and get_text of MariaDB 10.11's sql_lex.cc,
// checked against a real server byte by byte (TestScannerMatchesServer).
// A ';' is a TokenPunct: statements end there to the server; DELIMITER is
// a command of the mariadb client, never sent, so to the scanner it is a
// word like any other.

// TokenKind is the kind of a Token.
type TokenKind uint8

// Token kinds.
const (
	// TokenSpace is a run of blanks (space, \t, \n, \v, \f, \r).
	TokenSpace TokenKind = iota
	// TokenWord is a run of name bytes: letters, digits, '_', '$' and any
	// byte >= 0x80 (a whole multi-byte character of the client's
	// character set): a keyword, a name or a number.
	TokenWord
	// TokenString is a string literal, quotes included: '..', or ".."
	// unless ANSI_QUOTES. A doubled quote stands for one, and a backslash
	// escapes the next byte unless NO_BACKSLASH_ESCAPES. Right after a
	// word x, X, b or B it is the body of a hex or bit literal (X'41'),
	// which ends at the next quote whatever precedes it.
	TokenString
	// TokenQuotedName is a quoted identifier, quotes included: `..`, or
	// ".." under ANSI_QUOTES. A doubled quote stands for one.
	TokenQuotedName
	// TokenComment is a comment MariaDB skips: # and -- line comments
	// (without their newline), /* .. */, and an executable comment whose
	// version the server's is below (or in MySQL's 50700-99999 for /*!).
	TokenComment
	// TokenExecStart is the marker of an executable comment MariaDB runs:
	// /*!, /*!NNNNN, /*M!, /*M!NNNNNN. The text after it is code, up to
	// TokenExecEnd.
	TokenExecStart
	// TokenExecEnd is the */ that ends a running executable comment.
	TokenExecEnd
	// TokenPunct is any other single byte (operators, parentheses, ';',
	// '@', '?', a lone backslash).
	TokenPunct
)

// Token is one lexical token: its kind and its byte span text[Start:End].
// Open marks a string, quoted name or block comment the text ends inside.
type Token struct {
	Kind       TokenKind
	Start, End int
	Open       bool
}

// ScanOptions are what MariaDB's reading of a text depends on.
type ScanOptions struct {
	// Mode is the session's sql_mode: ModeNoBackslashEscapes and
	// ModeANSIQuotes change where strings and names end.
	Mode Mode
	// Charset is the connection's character_set_client. In big5, cp932,
	// gbk, sjis and gb18030 a multi-byte character's trailing byte may be
	// 0x5c (a backslash) or 0x60 (a back quote): inside such a character
	// it is neither. "" or any other character set reads bytes alone
	// (their multi-byte characters hold no byte below 0x80).
	Charset string
	// ServerVersion is the server's version in executable comments'
	// numbering (101106 for 10.11.6); 0 when unknown: a version comment
	// is then run and the scanner notes a doubt.
	ServerVersion int
}

// Scanner reads a text token by token; the zero Scanner reads "". Its
// tokens cover the text, in order, without gaps.
type Scanner struct {
	s    string
	i    int
	o    ScanOptions
	mb   func(s string, i int) int
	exec bool // inside an executable comment being run
	// blank8 is the byte above ASCII the client's character set reads as
	// white space (BlankByte), 0 for none.
	blank8 byte
	// hex: the last token was a lone word x, X, b or B, right before i.
	hex bool
	// Doubt says why MariaDB may read the text otherwise ("" when it
	// may not): an unterminated comment or executable comment, an
	// executable comment inside a running one, a statement end inside
	// one, a version comment when the server's version is unknown, a NUL
	// byte in a line comment.
	Doubt string
}

// NewScanner returns a Scanner of text read as o says.
func NewScanner(text string, o ScanOptions) Scanner {
	return Scanner{s: text, o: o, mb: mbCharLen(o.Charset), blank8: BlankByte(o.Charset)}
}

// Scan returns the tokens of text read as o says, and the Scanner's doubt.
func Scan(text string, o ScanOptions) (toks []Token, doubt string) {
	sc := NewScanner(text, o)
	for {
		t, ok := sc.Next()
		if !ok {
			return toks, sc.Doubt
		}
		toks = append(toks, t)
	}
}

func (sc *Scanner) doubt(why string) {
	if sc.Doubt == "" {
		sc.Doubt = why
	}
}

// Next returns the next token; ok is false at the end of the text.
func (sc *Scanner) Next() (t Token, ok bool) {
	s := sc.s
	i := sc.i
	if i >= len(s) {
		if sc.exec {
			sc.doubt("unterminated executable comment")
			sc.exec = false
		}
		return Token{}, false
	}
	hex := sc.hex
	sc.hex = false
	t = Token{Start: i}
	c := s[i]
	switch {
	case sc.blank(c):
		for i < len(s) && sc.blank(s[i]) {
			i++
		}
		t.Kind, t.End = TokenSpace, i
	case c == '\'' && hex:
		t.Kind = TokenString
		if end := strings.IndexByte(s[i+1:], '\''); end >= 0 {
			t.End = i + 1 + end + 1
		} else {
			t.End, t.Open = len(s), true
		}
	case c == '\'':
		t.Kind = TokenString
		t.End, t.Open = sc.quoted(i, c, sc.o.Mode&ModeNoBackslashEscapes == 0)
	case c == '"' && sc.o.Mode&ModeANSIQuotes == 0:
		t.Kind = TokenString
		t.End, t.Open = sc.quoted(i, c, sc.o.Mode&ModeNoBackslashEscapes == 0)
	case c == '"' || c == '`':
		t.Kind = TokenQuotedName
		t.End, t.Open = sc.quoted(i, c, false)
	case IsWordByte(c):
		for i < len(s) && IsWordByte(s[i]) && !sc.blank(s[i]) {
			if n := sc.mb(s, i); n > 1 {
				i += n
			} else {
				i++
			}
		}
		t.Kind, t.End = TokenWord, i
		if i-t.Start == 1 {
			switch c {
			case 'x', 'X', 'b', 'B':
				sc.hex = true
			}
		}
	case c == '#' || c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' ' || s[i+2] == 0x7f || sc.blank(s[i+2])):
		end := strings.IndexByte(s[i:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += i
		}
		if strings.IndexByte(s[i:end], 0) >= 0 {
			sc.doubt("a NUL byte ends a line comment")
		}
		t.Kind, t.End = TokenComment, end
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		sc.blockComment(&t)
	case c == '*' && sc.exec && i+1 < len(s) && s[i+1] == '/':
		sc.exec = false
		t.Kind, t.End = TokenExecEnd, i+2
	default:
		if c == ';' && sc.exec {
			sc.doubt("a statement ends inside an executable comment")
		}
		t.Kind, t.End = TokenPunct, i+1
	}
	sc.i = t.End
	return t, true
}

// quoted returns the end of the string or quoted name opening at i (after
// its closing quote; the end of the text, open, when there is none): a
// doubled quote stands for one, a multi-byte character is read whole, and
// a backslash escapes the next byte when backslash is set.
func (sc *Scanner) quoted(i int, q byte, backslash bool) (end int, open bool) {
	s := sc.s
	for i++; i < len(s); i++ {
		c := s[i]
		if c == 0 && !backslash && q != '\'' && (q == '`' || sc.o.Mode&ModeANSIQuotes != 0) {
			return len(s), true // MariaDB's reading of a quoted name stops at a NUL byte
		}
		if c >= 0x80 {
			if n := sc.mb(s, i); n > 1 {
				i += n - 1
			}
			continue
		}
		switch {
		case c == '\\' && backslash:
			i++
		case c == q && i+1 < len(s) && s[i+1] == q:
			i++
		case c == q:
			return i + 1, false
		}
	}
	return len(s), true
}

// blockComment reads the /* at t.Start: a comment the server skips
// (TokenComment, whole) or the marker of an executable comment it runs
// (TokenExecStart).
func (sc *Scanner) blockComment(t *Token) {
	s := sc.s
	j := t.Start + 2
	maria := strings.HasPrefix(s[j:], "M!")
	if !maria && !strings.HasPrefix(s[j:], "!") {
		t.Kind = TokenComment
		t.End, t.Open = consumeComment(s, j, 0)
		if t.Open {
			sc.doubt("unterminated comment")
		}
		return
	}
	if maria {
		j += 2
	} else {
		j++
	}
	digits := 0
	for digits < 6 && j+digits < len(s) && isDigit(s[j+digits]) {
		digits++
	}
	if digits < 5 { // not a version: run
		sc.enter(t, j)
		return
	}
	version := 0
	for _, d := range s[j : j+digits] {
		version = version*10 + int(d-'0')
	}
	run := true
	if sc.o.ServerVersion == 0 {
		sc.doubt("a version comment and the server's version is unknown")
	} else {
		run = version <= sc.o.ServerVersion && (maria || version < 50700 || version > 99999)
	}
	if run {
		sc.enter(t, j+digits)
		return
	}
	t.Kind = TokenComment
	t.End, t.Open = consumeComment(s, j, 1)
	if t.Open {
		sc.doubt("unterminated comment")
	}
}

// enter makes t the marker t.Start:end of an executable comment that runs.
// One inside another that runs is not resolved: MariaDB's first */ would
// end both.
func (sc *Scanner) enter(t *Token, end int) {
	if sc.exec {
		sc.doubt("an executable comment inside an executable comment")
	}
	sc.exec = true
	t.Kind, t.End = TokenExecStart, end
}

// consumeComment returns the offset after the */ that closes a comment
// whose body starts at i, as MariaDB's consume_comment finds it: the first
// */, except that up to nest /* ... */ comments inside are skipped whole.
// open is true when the text ends first.
func consumeComment(s string, i, nest int) (end int, open bool) {
	for i < len(s) {
		c := s[i]
		i++
		if nest > 0 && c == '/' && i < len(s) && s[i] == '*' {
			i, _ = consumeComment(s, i+1, nest-1)
			continue
		}
		if c == '*' && i < len(s) && s[i] == '/' {
			return i + 1, false
		}
	}
	return len(s), true
}

// blank: MariaDB's white space (my_isspace of the client's character set):
// space, \t, \n, \v, \f, \r, and the character set's BlankByte.
func (sc *Scanner) blank(c byte) bool {
	return isBlank(c) || c == sc.blank8 && c != 0
}

// blankBytes are the bytes above ASCII that MariaDB's client character
// sets read as white space between tokens (my_isspace): the no-break
// space 0xa0 of the ISO-8859 and Windows sets that have one, and 0xff in
// the DOS code pages. Every other client character set has none.
// TestBlanksMatchServer asks the server about every byte of every
// character set it has, so a set missing here fails it.
var blankBytes = map[string]byte{
	"armscii8": 0xa0, "cp1250": 0xa0, "dec8": 0xa0, "geostd8": 0xa0, "greek": 0xa0,
	"hebrew": 0xa0, "latin1": 0xa0, "latin2": 0xa0, "latin5": 0xa0, "latin7": 0xa0,
	"cp852": 0xff, "cp866": 0xff, "keybcs2": 0xff,
}

// BlankByte returns the byte above ASCII that the client character set
// charset reads as white space, 0 when it reads none.
func BlankByte(charset string) byte {
	return blankBytes[strings.ToLower(charset)]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isBlank: MariaDB's white space (my_isspace) in the ASCII range.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// IsWordByte reports whether c may be part of an unquoted name or number:
// a letter, a digit, '_', '$' or any byte >= 0x80.
func IsWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '$' || c >= 0x80
}

// mbCharLen returns, for the character set named cs, the length of the
// multi-byte character at s[i] (0 when s[i] does not start one): MariaDB's
// my_ismbchar for the character sets whose trailing bytes may be ASCII.
func mbCharLen(cs string) func(s string, i int) int {
	switch strings.ToLower(cs) {
	case "gbk":
		return func(s string, i int) int {
			return pair(s, i, 0x81, 0xfe, func(c byte) bool { return c >= 0x40 && c <= 0x7e || c >= 0x80 && c <= 0xfe })
		}
	case "big5":
		return func(s string, i int) int {
			return pair(s, i, 0xa1, 0xf9, func(c byte) bool { return c >= 0x40 && c <= 0x7e || c >= 0xa1 && c <= 0xfe })
		}
	case "sjis", "cp932":
		return func(s string, i int) int {
			c := s[i]
			if !(c >= 0x81 && c <= 0x9f || c >= 0xe0 && c <= 0xfc) || i+1 >= len(s) {
				return 0
			}
			if t := s[i+1]; t >= 0x40 && t <= 0x7e || t >= 0x80 && t <= 0xfc {
				return 2
			}
			return 0
		}
	case "gb18030":
		return func(s string, i int) int {
			if s[i] < 0x81 || s[i] > 0xfe || i+1 >= len(s) {
				return 0
			}
			t := s[i+1]
			if t >= 0x40 && t <= 0x7e || t >= 0x80 && t <= 0xfe {
				return 2
			}
			if isDigit(t) && i+3 < len(s) && s[i+2] >= 0x81 && s[i+2] <= 0xfe && isDigit(s[i+3]) {
				return 4
			}
			return 0
		}
	}
	return func(string, int) int { return 0 }
}

// pair is the length of a two-byte character at s[i] whose first byte is
// in lo..hi and whose second is trail.
func pair(s string, i int, lo, hi byte, trail func(byte) bool) int {
	if s[i] < lo || s[i] > hi || i+1 >= len(s) || !trail(s[i+1]) {
		return 0
	}
	return 2
}

// PlainBlanks returns text with the bytes the client's character set
// charset reads as white space but a reader of ASCII does not (BlankByte:
// latin1's 0xa0, the no-break space, cp852's 0xff) replaced by spaces, where they separate
// tokens or follow a "--" they make a comment of: the result reads to
// lockproxy's parser, which knows no character set, as text reads to the
// server. Offsets stay those of text. m is the session's sql_mode.
func PlainBlanks(text, charset string, m Mode) string {
	blank := BlankByte(charset)
	if blank == 0 || strings.IndexByte(text, blank) < 0 {
		return text
	}
	var b []byte
	sc := NewScanner(text, ScanOptions{Mode: m, Charset: charset})
	for {
		t, ok := sc.Next()
		if !ok {
			break
		}
		from, to := t.Start, t.End
		switch {
		case t.Kind == TokenSpace:
		case t.Kind == TokenComment && text[from] == '-' && from+2 < len(text):
			from, to = from+2, from+3
		default:
			continue
		}
		for i := from; i < to; i++ {
			if text[i] == blank {
				if b == nil {
					b = []byte(text)
				}
				b[i] = ' '
			}
		}
	}
	if b == nil {
		return text
	}
	return string(b)
}
