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
// It reads sql with the Scanner, which follows MariaDB 10.11's lexer
// (lex_one_token in sql_lex.cc), checked against a real server
// (TestScannerMatchesServer, TestExecutableCommentsMatchServer): strings end
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
	s   string
	o   Options
	b   []byte // the blanked copy of s, nil until something is blanked
	why string
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
	sc := NewScanner(x.s, ScanOptions{Mode: x.o.Mode, ServerVersion: x.o.ServerVersion})
	for {
		t, ok := sc.Next()
		if sc.Doubt != "" {
			x.doubt(sc.Doubt)
		}
		if !ok {
			return
		}
		switch t.Kind {
		case TokenComment, TokenExecStart, TokenExecEnd:
			x.blank(t.Start, t.End)
		}
	}
}

// Expand returns the text a MariaDB server of version o.ServerVersion runs
// of sql under sql_mode o.Mode, as AnalyzeWith reads it before parsing:
// the comments the server skips and the markers of the executable comments
// it runs are blanked, byte for byte, so offsets stay those of sql. When
// uncertain is not empty the server may run something else (see
// Analysis.Uncertain). Safe for concurrent use.
func Expand(sql string, o Options) (text, uncertain string) {
	return expand(sql, o)
}
