package parser

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// serverConn is one connection to the bed's primary with what it answers.
type serverConn struct {
	t    *testing.T
	conn *sql.Conn
	n    int // queries sent
}

// answer runs q and returns its rows as text ("error" when the server
// refuses it; the message quotes the text, so only the fact compares).
func (c *serverConn) answer(q string) string {
	c.t.Helper()
	c.n++
	rows, err := c.conn.QueryContext(context.Background(), q)
	if err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			c.t.Fatalf("%q: %v", q, err)
		}
		if me.Number == 1064 { // ER_PARSE_ERROR
			return "error"
		}
		return fmt.Sprint("error ", me.Number)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		c.t.Fatal(err)
	}
	out := []string{fmt.Sprint(len(cols), " columns")}
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			c.t.Fatal(err)
		}
		for _, v := range vals {
			out = append(out, string(v))
		}
	}
	if rows.Err() != nil {
		return "error"
	}
	return strings.Join(out, ",")
}

func (c *serverConn) exec(q string) {
	c.t.Helper()
	if _, err := c.conn.ExecContext(context.Background(), q); err != nil {
		c.t.Fatalf("%s: %v", q, err)
	}
}

// unescape is the value MariaDB gives the string literal tok (quotes
// included) of text: its unescape in sql_lex.cc.
func unescape(lit string, o ScanOptions) string {
	q := lit[0]
	body := lit[1 : len(lit)-1]
	mb := mbCharLen(o.Charset)
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		if n := mb(body, i); n > 1 && i+n <= len(body) {
			b.WriteString(body[i : i+n])
			i += n - 1
			continue
		}
		c := body[i]
		switch {
		case c == '\\' && o.Mode&ModeNoBackslashEscapes == 0 && i+1 < len(body):
			i++
			switch e := body[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case '0':
				b.WriteByte(0)
			case 'Z':
				b.WriteByte(0x1a)
			case '_', '%':
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				b.WriteByte(e)
			}
		case c == q:
			b.WriteByte(c)
			i++ // a doubled quote
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// predictString is what the server answers to SELECT HEX(<body>) as the
// scanner reads it: the hex of the string literals body is made of, or
// "error" when body is not string literals alone.
func predictString(text, body string, o ScanOptions) string {
	toks, _ := Scan(text, o)
	from := len(text) - len(body) - 1 // the last byte is ")"
	var v strings.Builder
	strs := 0
	for _, t := range toks {
		switch {
		case t.End <= from:
		case t.Start == len(text)-1 && t.Kind == TokenPunct:
			if strs == 0 {
				return "error"
			}
			return fmt.Sprintf("1 columns,%X", v.String())
		case t.Kind == TokenQuotedName && !t.Open && t.Start == from && t.End == len(text)-1:
			return "name"
		case t.Kind == TokenSpace && strs > 0:
		case t.Kind == TokenString && !t.Open && t.Start >= from:
			strs++
			v.WriteString(unescape(text[t.Start:t.End], o))
		default:
			return "error"
		}
	}
	return "error"
}

// endsAsOne reports whether the scanner reads text from offset from to
// its end as one token of kind k.
func endsAsOne(text string, from int, k TokenKind, o ScanOptions) bool {
	toks, _ := Scan(text, o)
	for _, t := range toks {
		if t.Start == from {
			return t.Kind == k && t.End == len(text) && !t.Open
		}
	}
	return false
}

// TestScannerMatchesServer is a differential test of the scanner against
// MariaDB: in each character set whose multi-byte characters may end in a
// backslash or a back quote (and in latin1 and utf8mb4), under each
// sql_mode that changes quoting, it sends texts that put bytes and
// multi-byte characters around quotes and backslashes, line comments
// followed by every byte, and executable comments of versions around the
// server's, and checks that the server reads them where the scanner
// says: the value of a string literal (its hex), the end of a quoted or
// unquoted name, whether a comment is one and whether an executable
// comment runs. LOCKPROXY_SCAN_SWEEP=full sweeps every lead and trailing
// byte pair instead of the edges of each range (a few minutes).
func TestScannerMatchesServer(t *testing.T) {
	bed := testbed.Get(t)
	db := bed.Open(t, bed.PrimaryAddr, "")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &serverConn{t: t, conn: conn}
	var version string
	if err := conn.QueryRowContext(context.Background(), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	v := ServerVersionOf(version)
	full := os.Getenv("LOCKPROXY_SCAN_SWEEP") == "full"

	// Multi-byte sequences: two-byte ones of every lead byte with the
	// trailing bytes that are ASCII syntax (backslash, back quote) or on
	// a range's edge, and gb18030's four-byte ones.
	edges := []byte{0x00, 0x20, 0x22, 0x27, 0x30, 0x39, 0x3f, 0x40, 0x5c, 0x60, 0x7e, 0x7f, 0x80, 0x81, 0xa0, 0xa1, 0xdf, 0xe0, 0xf9, 0xfa, 0xfc, 0xfd, 0xfe, 0xff}
	leadEdges := []byte{0x80, 0x81, 0x9f, 0xa0, 0xa1, 0xdf, 0xe0, 0xf9, 0xfa, 0xfc, 0xfd, 0xfe, 0xff}
	var seqs []string
	for l := 0x80; l <= 0xff; l++ {
		for _, tr := range edges {
			if full || tr == 0x5c || tr == 0x60 || strings.IndexByte(string(leadEdges), byte(l)) >= 0 {
				seqs = append(seqs, string([]byte{byte(l), tr}))
			}
		}
	}
	if full {
		for l := 0x80; l <= 0xff; l++ {
			for tr := 0; tr <= 0xff; tr++ {
				seqs = append(seqs, string([]byte{byte(l), byte(tr)}))
			}
		}
	}
	for _, l := range leadEdges {
		for _, m := range []byte{0x80, 0x81, 0x5c, 0xfe, 0xff} {
			seqs = append(seqs, string([]byte{l, '0', m, '9'}), string([]byte{l, '9', m, '0'}), string([]byte{l, '0', m, '\\'}))
		}
	}
	single := make([]string, 256)
	for b := range single {
		single[b] = string([]byte{byte(b)})
	}

	modes := []string{"", "NO_BACKSLASH_ESCAPES", "ANSI_QUOTES"}
	charsets := []string{"latin1", "utf8mb4", "gbk", "big5", "sjis", "cp932", "gb18030"}
	mismatches := 0
	check := func(what, text, want, got string) {
		t.Helper()
		if got == "error 1300" {
			return // not a valid character of the set: refused before any syntax is read
		}
		if want != got {
			mismatches++
			if mismatches <= 100000 {
				t.Errorf("%s %q: the server answers %q, the scanner predicts %q", what, text, got, want)
			}
		}
	}
	for _, cs := range charsets {
		if c.answer("SHOW CHARACTER SET LIKE '"+cs+"'") == "4 columns" {
			t.Logf("the server has no character set %s: not compared", cs)
			continue
		}
		c.exec("SET NAMES " + cs)
		parts := single
		if cs != "latin1" && cs != "utf8mb4" {
			parts = append(seqs, single[0x80:]...)
		}
		for _, mode := range modes {
			c.exec("SET SESSION sql_mode = '" + mode + "'")
			o := ScanOptions{Mode: ParseSQLMode(mode), Charset: cs, ServerVersion: v}
			what := cs + " " + mode
			for _, x := range parts {
				for _, body := range []string{
					"'" + x + "'", "'" + x + `\'` + " '", `'\` + x + "'", "'" + x + "''" + "'",
					`"` + x + `"`, `"` + x + `\"` + ` "`,
				} {
					text := "SELECT HEX(" + body + ")"
					got := c.answer(text)
					if got == "error 1054" { // unknown column: a name
						got = "name"
					}
					check(what, text, predictString(text, body, o), got)
				}
				for _, body := range []string{"`" + x + "`", "`" + x + "``" + "`", `"` + x + `"`} {
					text := "SELECT 1 AS " + body
					got := c.answer(text)
					want := "error"
					if endsAsOne(text, len(text)-len(body), TokenQuotedName, o) || endsAsOne(text, len(text)-len(body), TokenString, o) {
						want = "ok"
					}
					if got != "error" { // not a syntax error
						got = "ok"
					}
					check(what, text, want, got)
				}
				if x[0] >= 0x80 && mode == "" {
					// A name's bytes: where the server reads one, the
					// scanner must (the scanner also takes bytes the
					// character set has no character for, which the
					// server refuses).
					text := "SELECT 1 AS a" + x + "b"
					if c.answer(text) != "error" && !endsAsOne(text, len(text)-len(x)-2, TokenWord, o) {
						check(what, text, "not one name", "one name")
					}
				}
				if len(x) == 1 && mode == "" && x != "#" && x != "." { // 1# is a comment, 1. a number
					// White space: SELECT 1<x>AS a answers 1 only where
					// x is.
					text := "SELECT 1" + x + "AS a"
					toks, _ := Scan(text, o)
					check(what, text, fmt.Sprint("blank:", len(toks) > 3 && toks[3].Kind == TokenSpace && toks[3].End == 9),
						fmt.Sprint("blank:", c.answer(text) == "1 columns,1"))
				}
			}
		}
		c.exec("SET SESSION sql_mode = ''")
		o := ScanOptions{Charset: cs, ServerVersion: v}
		// "--" followed by every byte (and by nothing): a comment, or two
		// minus signs.
		for b := -1; b < 256; b++ {
			text := "SELECT 1 --"
			if b >= 0 {
				text += string([]byte{byte(b)}) + "9 , 2"
			}
			toks, _ := Scan(text, o)
			comment := len(toks) > 4 && toks[4].Kind == TokenComment
			got := c.answer(text)
			commented := c.answer(strings.Replace(text, "--", "#", 1))
			check(cs, text, fmt.Sprint("comment:", comment), fmt.Sprint("comment:", got == commented))
		}
	}

	// Executable comments of versions around the server's, in both forms,
	// and every other comment form: the server answers the text as it
	// answers the text the scanner's tokens make of it (Expand).
	c.exec("SET NAMES utf8mb4")
	versions := []string{"", "0", "4000", "9999", "40000", "50699", "50700", "50701", "99999", "100000",
		fmt.Sprint(v - 1), fmt.Sprint(v), fmt.Sprint(v + 1), fmt.Sprint(v / 100 * 100), fmt.Sprint(v/100*100 + 100),
		"999999", "1000000", fmt.Sprint(v) + "0", "0" + fmt.Sprint(v)}
	var texts []string
	for _, marker := range []string{"/*!", "/*M!", "/*m!", "/*T!", "/*+", "/* ", "/*"} {
		for _, ver := range versions {
			texts = append(texts, "SELECT 1 "+marker+ver+" +1 */", "SELECT 1 "+marker+ver+"+1 */ +2",
				"SELECT 1 "+marker+ver+" /* +1 */ +2 */ +4", "SELECT 1 "+marker+ver+" + LENGTH('*/') */")
		}
	}
	texts = append(texts, "SELECT 1 #+1\n+2", "SELECT 1 /* /* +1 */ +2 */", "SELECT 1 /*! -- +2 \n +4 */",
		"SELECT x'41' /* ' */, 2", "SELECT b'1' /* ' */, 2", "SELECT `a /* b` FROM (SELECT 5 AS `a /* b`) t /*M! , 6 */")
	for _, text := range texts {
		exp, why := Expand(text, Options{ServerVersion: v})
		if why != "" {
			continue // the scanner says it cannot settle it
		}
		check("expand", text, c.answer(exp), c.answer(text))
	}
	t.Logf("%d texts sent, %d mismatches (server %s)", c.n, mismatches, version)
}

// fuzzCorpusTexts returns the first string of every entry of the parser's
// checked-in fuzz corpora (testdata/fuzz/*/*).
func fuzzCorpusTexts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if arg, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(arg, ")")); err == nil {
					out = append(out, s)
				}
				break
			}
		}
	}
	return out
}

// TestScannerMatchesServerOnCorpus drives the scanner and MariaDB side by
// side on the parser's corpus and fuzz corpora: under each quoting mode,
// the server prepares (reads without running) each text as it prepares
// the text the scanner's tokens make of it (Expand: the comments it skips
// blanked, the markers of those it runs removed): the same success or the
// same error.
func TestScannerMatchesServerOnCorpus(t *testing.T) {
	bed := testbed.Get(t)
	db := bed.Open(t, bed.PrimaryAddr, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	v := ServerVersionOf(version)
	prepare := func(text string) string {
		t.Helper()
		if _, err := conn.ExecContext(ctx, "SET @lockproxy_text = ?", text); err != nil {
			t.Fatal(err)
		}
		_, err := conn.ExecContext(ctx, "PREPARE lockproxy_scan FROM @lockproxy_text")
		var me *mysql.MySQLError
		switch {
		case err == nil:
			return "prepared"
		case errors.As(err, &me):
			return fmt.Sprint("error ", me.Number)
		}
		t.Fatalf("%q: %v", text, err)
		return ""
	}
	var texts []string
	for _, c := range readCorpus(t) {
		texts = append(texts, c.SQL)
	}
	// Each text also inside and beside comments of every form, the
	// comment's quote left for a wrong reading to pair.
	for _, text := range texts[:len(texts):len(texts)] {
		texts = append(texts, "/*M!"+text+" */", "/*!"+text+" */", "/*!99999 ' */ "+text+" /* ' */",
			"/*!100000 "+text+" */", text+" --\x01'", text+" -- '", text+" #'", "/* ' */"+text)
	}
	texts = append(texts, fuzzCorpusTexts(t)...)
	compared := 0
	for _, mode := range []string{"", "NO_BACKSLASH_ESCAPES", "ANSI_QUOTES"} {
		if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = '"+mode+"'"); err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			exp, why := Expand(text, Options{Mode: ParseSQLMode(mode), ServerVersion: v})
			if why != "" || exp == text {
				continue // nothing to compare, or the scanner says it cannot settle it
			}
			compared++
			if got, want := prepare(exp), prepare(text); got != want {
				t.Errorf("%s %q: the server answers %s, to the scanner's reading %q %s", mode, text, want, exp, got)
			}
		}
	}
	if compared < 20 {
		t.Fatalf("only %d texts compared", compared)
	}
	t.Logf("%d texts compared with the server's reading", compared)
}

// TestBlanksMatchServer asks MariaDB, for every character set a client may
// use and every byte, whether the byte is white space between tokens
// (SELECT 1<b>AS a answers 1 only where it is), and checks the scanner
// and PlainBlanks read it so: BlankByte must name every byte above ASCII
// that some character set reads as white space.
func TestBlanksMatchServer(t *testing.T) {
	bed := testbed.Get(t)
	db := bed.Open(t, bed.PrimaryAddr, "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &serverConn{t: t, conn: conn}
	rows, err := conn.QueryContext(ctx, "SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var sets []string
	for rows.Next() {
		var cs string
		if err := rows.Scan(&cs); err != nil {
			t.Fatal(err)
		}
		sets = append(sets, cs)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, cs := range sets {
		if _, err := conn.ExecContext(ctx, "SET NAMES "+cs); err != nil {
			continue // not a client character set (ucs2, utf16, utf32)
		}
		compared++
		o := ScanOptions{Charset: cs}
		for b := 0; b < 256; b++ {
			if b == '#' || b == '.' || b >= '0' && b <= '9' {
				continue // 1# is a comment, 1. and 12 numbers
			}
			text := "SELECT 1" + string([]byte{byte(b)}) + "AS a"
			server := c.answer(text) == "1 columns,1"
			toks, _ := Scan(text, o)
			scanned := len(toks) > 3 && toks[3].Kind == TokenSpace && toks[3].End == 9
			plain := PlainBlanks(text, cs, 0)[8] == ' ' || isBlank(byte(b))
			if server != scanned || server != plain {
				t.Errorf("%s byte %#x: white space to the server %v, to the scanner %v, to PlainBlanks %v", cs, b, server, scanned, plain)
			}
		}
	}
	if compared < 30 {
		t.Fatalf("only %d client character sets compared", compared)
	}
	t.Logf("%d client character sets, every byte compared", compared)
}
