package parser

import (
	"strings"
	"testing"
)

// scanCharsets are the character sets FuzzScan reads texts in.
var scanCharsets = []string{"", "latin1", "utf8mb4", "gbk", "big5", "sjis", "cp932", "gb18030"}

// scanOptionsOf makes ScanOptions from a fuzzed byte: its low bits pick
// the sql_mode flags, the rest the character set; version says whether
// the server's version is known.
func scanOptionsOf(b byte) ScanOptions {
	o := ScanOptions{Charset: scanCharsets[int(b>>3)%len(scanCharsets)]}
	if b&1 != 0 {
		o.Mode |= ModeNoBackslashEscapes
	}
	if b&2 != 0 {
		o.Mode |= ModeANSIQuotes
	}
	if b&4 != 0 {
		o.ServerVersion = DefaultServerVersion
	}
	return o
}

// checkTokens asserts what every scan promises: tokens cover the text in
// order without gaps, none is empty, each holds what its kind says, and
// only the last may be open.
func checkTokens(t *testing.T, text string, o ScanOptions, toks []Token) {
	t.Helper()
	at := 0
	for n, tok := range toks {
		if tok.Start != at || tok.End <= tok.Start || tok.End > len(text) {
			t.Fatalf("%q (%+v): token %d %+v does not follow offset %d", text, o, n, tok, at)
		}
		at = tok.End
		s := text[tok.Start:tok.End]
		ok := true
		switch tok.Kind {
		case TokenSpace:
			for i := 0; i < len(s); i++ {
				ok = ok && (isBlank(s[i]) || s[i] == 0xa0)
			}
		case TokenWord:
			for i := 0; i < len(s); i++ {
				ok = ok && (IsWordByte(s[i]) || i > 0 && s[i-1] >= 0x80)
			}
		case TokenString:
			ok = s[0] == '\'' || s[0] == '"'
		case TokenQuotedName:
			ok = s[0] == '`' || s[0] == '"'
		case TokenComment:
			ok = s[0] == '#' || strings.HasPrefix(s, "--") || strings.HasPrefix(s, "/*")
		case TokenExecStart:
			ok = strings.HasPrefix(s, "/*!") || strings.HasPrefix(s, "/*M!")
		case TokenExecEnd:
			ok = s == "*/"
		case TokenPunct:
			ok = len(s) == 1
		default:
			ok = false
		}
		if !ok {
			t.Fatalf("%q (%+v): token %d %+v is not what its kind says: %q", text, o, n, tok, s)
		}
		if tok.Open && (n != len(toks)-1 || tok.End != len(text)) {
			t.Fatalf("%q (%+v): open token %d %+v before the end", text, o, n, tok)
		}
	}
	if at != len(text) {
		t.Fatalf("%q (%+v): tokens end at %d of %d", text, o, at, len(text))
	}
}

// FuzzScan feeds arbitrary text to the scanner under every reading: it
// must never panic and its tokens must cover the text (checkTokens), and
// expand must keep every offset.
func FuzzScan(f *testing.F) {
	seeds := []string{
		"", "SELECT 1", "SELECT 'a\\'b', \"c\"\"d\", `e``f`", "x'41' b'1' X'", "SELECT 1 -- c\n, 2 #x\n",
		"SELECT 1 --", "SELECT 1 --\x01", "/*! 1 */ /*!50700 2 */ /*M!100000 3 */ /*M! 4", "/* /* */ */ */",
		"SELECT '\x81\\' '", "SELECT `\x81`` `", "SELECT '\\\x81\\''", "SELECT '\x81\x30\x81\x30'", "'", "\"", "`",
		"SELECT \"a\\\" b\"", "*/", "/*!999999 /* */ x */", "SELECT 1;SELECT 2", "DELIMITER //", "SELECT `\x00`",
		"SELECT\xa01 --\xa0", "a\x81", "\x81",
	}
	for i, s := range seeds {
		f.Add(s, byte(i*7))
	}
	for i, c := range readCorpus(f) {
		f.Add(c.SQL, byte(i))
	}
	f.Fuzz(func(t *testing.T, text string, b byte) {
		o := scanOptionsOf(b)
		toks, _ := Scan(text, o)
		checkTokens(t, text, o, toks)
		if x, _ := expand(text, Options{Mode: o.Mode, ServerVersion: o.ServerVersion}); len(x) != len(text) {
			t.Fatalf("expand(%q) is %d bytes long, not %d", text, len(x), len(text))
		}
	})
}

func TestScanTokens(t *testing.T) {
	kinds := map[TokenKind]string{TokenSpace: "_", TokenWord: "w", TokenString: "s", TokenQuotedName: "n",
		TokenComment: "c", TokenExecStart: "x", TokenExecEnd: "e", TokenPunct: "p"}
	cases := []struct {
		text string
		o    ScanOptions
		want string // kind and text of each token but blanks
	}{
		{"SELECT a,'b''c' FROM `t``u`", ScanOptions{}, "w:SELECT w:a p:, s:'b''c' w:FROM n:`t``u`"},
		{`SELECT 'a\'b', "c"`, ScanOptions{}, `w:SELECT s:'a\'b' p:, s:"c"`},
		{`SELECT 'a\', "c"`, ScanOptions{Mode: ModeNoBackslashEscapes}, `w:SELECT s:'a\' p:, s:"c"`},
		{`SELECT "a\" b"`, ScanOptions{Mode: ModeANSIQuotes}, `w:SELECT n:"a\" w:b n:"`},
		{`x'5c' '\''`, ScanOptions{}, `w:x s:'5c' s:'\''`},
		{"1 --x -- y\n#z", ScanOptions{}, "w:1 p:- p:- w:x c:-- y c:#z"},
		{"/*! a */ /*!50700 b */ /*M!100000 c */", ScanOptions{ServerVersion: 101100},
			"x:/*! w:a e:*/ c:/*!50700 b */ x:/*M!100000 w:c e:*/"},
		{"/*!999999 /* a */ b */ c", ScanOptions{ServerVersion: 101100}, "c:/*!999999 /* a */ b */ w:c"},
		// gbk: 0x81 0x5c is one character, so the backslash escapes nothing.
		{"'\x81\\' '", ScanOptions{Charset: "gbk"}, "s:'\x81\\' s:'"},
		{"'\x81\\' '", ScanOptions{}, "s:'\x81\\' '"},
		{"`\x81` `", ScanOptions{Charset: "sjis"}, "n:`\x81` `"},
		{"`\x81` `", ScanOptions{}, "n:`\x81` n:`"},
		{"a\xa0b", ScanOptions{Charset: "latin1"}, "w:a w:b"},
	}
	for _, c := range cases {
		toks, _ := Scan(c.text, c.o)
		checkTokens(t, c.text, c.o, toks)
		var got []string
		for _, tok := range toks {
			if tok.Kind != TokenSpace {
				got = append(got, kinds[tok.Kind]+":"+c.text[tok.Start:tok.End])
			}
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("Scan(%q, %+v) = %q, want %q", c.text, c.o, g, c.want)
		}
	}
}

func TestPlainBlanks(t *testing.T) {
	for _, c := range []struct{ in, charset, want string }{
		{"UPDATE\xa0t\xa0SET a = '\xa0' --\xa0x", "latin1", "UPDATE t SET a = '\xa0' -- x"},
		{"UPDATE\xa0t", "utf8mb4", "UPDATE\xa0t"},
		{"SELECT `\xa0`, a\xa0 #\xa0", "LATIN1", "SELECT `\xa0`, a  #\xa0"},
	} {
		if got := PlainBlanks(c.in, c.charset, 0); got != c.want {
			t.Errorf("PlainBlanks(%q, %s) = %q, want %q", c.in, c.charset, got, c.want)
		}
	}
}
