package parser

import "strings"

// expand returns the text MariaDB runs of sql: the comments it ignores are
// blanked, and of the executable comments it runs (/*! ... */, /*M! ... */,
// version-numbered ones the server's version admits) only the markers are
// blanked, their content kept. Blanking replaces every byte by a space
// (newlines stay), so offsets in the result are offsets in sql, and no
// comment of any form is left for the TiDB parser to read its own way
// (/*T! ... */, /*+ ... */, its reading of /*!).
//
// It follows MariaDB 10.11's lexer (lex_one_token in sql_lex.cc), checked
// against a real server (TestExecutableCommentsMatchServer): strings end
// where that lexer ends them under o.Mode (backslash escapes unless
// NO_BACKSLASH_ESCAPES; "x" an identifier under ANSI_QUOTES), `--` starts a
// comment only before a blank or control byte or at the end, `#` always;
// a version comment is five digits or six, run when the version is at most
// the server's and, for the /*! form, outside MySQL's 50700-99999; a
// comment that is not run may hold one nested /* */ comment.
//
// uncertain says why the result may differ from what MariaDB runs ("" when
// it does not): an unterminated comment, an executable comment inside an
// executable comment, a statement end inside one, a version comment when
// the server's version is unknown, a NUL byte ending a line comment, a
// comment right after "--" (blanked, it would make a "-- " comment).
func expand(sql string, o Options) (text, uncertain string) {
	if !strings.ContainsAny(sql, "/#-") {
		return sql, ""
	}
	x := expander{s: sql, o: o}
	x.run()
	if x.b == nil {
		return sql, x.why
	}
	return string(x.b), x.why
}

// expander is the state of one expand.
type expander struct {
	s    string
	o    Options
	b    []byte // the blanked copy of s, nil until something is blanked
	why  string
	exec bool // inside an executable comment being run
}

func (x *expander) doubt(why string) {
	if x.why == "" {
		x.why = why
	}
}

// blank replaces s[from:to] by spaces (newlines kept). Right after "--"
// the space would start a comment that the server, which saw "--/*",
// does not read: that text is left Uncertain.
func (x *expander) blank(from, to int) {
	if x.b == nil {
		x.b = []byte(x.s)
	}
	if from >= 2 && x.b[from-1] == '-' && x.b[from-2] == '-' {
		x.doubt("a comment right after --")
	}
	for i := from; i < to; i++ {
		if x.b[i] != '\n' {
			x.b[i] = ' '
		}
	}
}

func (x *expander) run() {
	s := x.s
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'':
			i = x.quoted(i, '\'', x.o.Mode&ModeNoBackslashEscapes == 0)
		case c == '"':
			i = x.quoted(i, '"', x.o.Mode&(ModeNoBackslashEscapes|ModeANSIQuotes) == 0)
		case c == '`':
			i = x.quoted(i, '`', false)
		case isWordByte(c) && c != '@':
			i = x.word(i)
		case c == '#':
			i = x.lineComment(i)
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' ' || s[i+2] == 0x7f):
			i = x.lineComment(i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = x.blockComment(i)
		case c == '*' && x.exec && i+1 < len(s) && s[i+1] == '/':
			x.blank(i, i+2)
			x.exec = false
			i += 2
		case c == ';' && x.exec:
			x.doubt("a statement ends inside an executable comment")
			i++
		default:
			i++
		}
	}
	if x.exec {
		x.doubt("unterminated executable comment")
	}
}

// quoted skips the string or quoted identifier opening at i; a doubled
// quote stands for one, and a backslash escapes the next byte when
// backslash is set. It returns the offset after the closing quote (the
// end of the text when there is none: the server rejects the text, and
// so does the parser).
func (x *expander) quoted(i int, q byte, backslash bool) int {
	s := x.s
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && backslash:
			i++
		case s[i] == q && i+1 < len(s) && s[i+1] == q:
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return len(s)
}

// word skips a word (keyword, identifier, number) at i. X'..' and B'..'
// literals end at the next quote whatever precedes it.
func (x *expander) word(i int) int {
	s := x.s
	start := i
	for i < len(s) && isWordByte(s[i]) && s[i] != '@' {
		i++
	}
	if i-start == 1 && i < len(s) && s[i] == '\'' {
		switch s[start] {
		case 'x', 'X', 'b', 'B':
			if end := strings.IndexByte(s[i+1:], '\''); end >= 0 {
				return i + 1 + end + 1
			}
			return len(s)
		}
	}
	return i
}

// lineComment blanks a # or -- comment at i up to the end of its line.
func (x *expander) lineComment(i int) int {
	end := strings.IndexByte(x.s[i:], '\n')
	if end < 0 {
		end = len(x.s)
	} else {
		end += i
	}
	if z := strings.IndexByte(x.s[i:end], 0); z >= 0 {
		x.doubt("a NUL byte ends a line comment")
	}
	x.blank(i, end)
	return end
}

// blockComment handles a /* at i: a comment the server ignores is
// blanked whole; of one it runs only the marker is blanked.
func (x *expander) blockComment(i int) int {
	s := x.s
	j := i + 2
	maria := strings.HasPrefix(s[j:], "M!")
	if !maria && !strings.HasPrefix(s[j:], "!") {
		end, closed := consumeComment(s, j, 0)
		if !closed {
			x.doubt("unterminated comment")
		}
		x.blank(i, end)
		return end
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
		x.enter(i, j)
		return j
	}
	version := 0
	for _, d := range s[j : j+digits] {
		version = version*10 + int(d-'0')
	}
	run := true
	if x.o.ServerVersion == 0 {
		x.doubt("a version comment and the server's version is unknown")
	} else {
		run = version <= x.o.ServerVersion && (maria || version < 50700 || version > 99999)
	}
	if run {
		x.enter(i, j+digits)
		return j + digits
	}
	end, closed := consumeComment(s, j, 1)
	if !closed {
		x.doubt("unterminated comment")
	}
	x.blank(i, end)
	return end
}

// enter blanks the marker s[from:to] of an executable comment that runs.
// One inside another that runs is not resolved: MariaDB's first */ would
// end both.
func (x *expander) enter(from, to int) {
	if x.exec {
		x.doubt("an executable comment inside an executable comment")
	}
	x.blank(from, to)
	x.exec = true
}

// consumeComment returns the offset after the */ that closes a comment
// whose body starts at i, as MariaDB's consume_comment finds it: the first
// */, except that up to nest /* ... */ comments inside are skipped whole.
// closed is false when the text ends first.
func consumeComment(s string, i, nest int) (end int, closed bool) {
	for i < len(s) {
		c := s[i]
		i++
		if nest > 0 && c == '/' && i < len(s) && s[i] == '*' {
			i, _ = consumeComment(s, i+1, nest-1)
			continue
		}
		if c == '*' && i < len(s) && s[i] == '/' {
			return i + 1, true
		}
	}
	return len(s), false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Expand returns the text a MariaDB server of version o.ServerVersion runs
// of sql under sql_mode o.Mode, as AnalyzeWith reads it before parsing:
// the comments the server skips and the markers of the executable comments
// it runs are blanked, byte for byte, so offsets stay those of sql. When
// uncertain is not empty the server may run something else (see
// Analysis.Uncertain). Safe for concurrent use.
func Expand(sql string, o Options) (text, uncertain string) {
	return expand(sql, o)
}
