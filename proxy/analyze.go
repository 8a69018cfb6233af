package proxy

// Statement analysis: the parser's facts for a text, by its shape when
// the shape's analysis can be reused, lexically when the text is past
// what the parser takes.

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// textReader analyses a session's texts as its server reads them (m,
// learnt on its primary connection be), with the server's analyzer and
// rules; it is made for each use (session.text).
type textReader struct {
	m   *modeState
	srv *Server
	be  *backendConn
	log *zap.Logger
}

// text is the session's textReader.
func (s *session) text() textReader {
	return textReader{m: &s.reading, srv: s.srv, be: s.be, log: s.log}
}

// analyzeQuery is analyze for a COM_QUERY text, by its shape where it has
// one (parser.Cache.AnalyzeShaped): a text that differs from one analysed
// before only in integer literals compared or assigned with `=` comes back
// as the analysis of the shape, with params binding its placeholders to
// the text's literals, and is not parsed again; sql is then the text
// itself. params is nil when an is the text's own analysis: in a client
// character set where a backslash may end a multi-byte character, and for
// a shape whose plan needs the text (Server.textShapes).
func (t textReader) analyzeQuery(q []byte) (an *parser.Analysis, params []any, sql string) {
	if !t.srv.needsFacts() {
		return t.analyze(q), nil, ""
	}
	opts := t.options() // first: it may learn a new character set or database
	if t.m.unsafe {
		return t.analyze(q), nil, ""
	}
	sql = parser.PlainBlanks(string(q), t.m.charset, opts.Mode)
	an, params, err := t.srv.analyzer.AnalyzeShaped(sql, t.m.db, opts)
	if err != nil {
		return unparsed(t.log, sql, t.m.db, err), nil, sql
	}
	if params != nil {
		if rs, ok := t.srv.textShapes.Peek(an); ok && rs == t.srv.ruleSet() {
			return t.analyzeText(sql), nil, sql
		}
	}
	return an, params, sql
}

// analyzeText is analyze for a text already a string, when facts are
// needed.
func (t textReader) analyzeText(sql string) *parser.Analysis {
	opts := t.options() // first: it may learn a new database
	sql = parser.PlainBlanks(sql, t.m.charset, opts.Mode)
	an, err := t.srv.analyzer.AnalyzeWith(sql, t.m.db, opts)
	if err != nil {
		return unparsed(t.log, sql, t.m.db, err)
	}
	return an
}

// lexicalKinds are the kinds of statement a text too long to parse may
// be (analyzeLexically): the bulk loads, long literals and dumps' rows
// whose length is data.
var lexicalKinds = map[parser.Kind]bool{parser.KindSelect: true, parser.KindInsert: true,
	parser.KindReplace: true, parser.KindUpdate: true, parser.KindDelete: true}

// analyzeLexically is the analysis of a COM_QUERY text over
// proxy.max_statement_size (tooLong says so): read as lockproxy reads a
// text the parser rejects (by its words: parser.AnalyzeLexically), it
// runs on the primary, and where it names a guarded table its rows cannot
// be keyed (the rule's on_unkeyed decides). nil, for the text to be
// refused, unless its first word is SELECT, INSERT, REPLACE, UPDATE or
// DELETE and the session's character set lets the lexer find the ends of
// its literals.
func (t textReader) analyzeLexically(q []byte, tooLong error) *parser.Analysis {
	opts := t.options() // first: it may learn a new character set or database
	if t.m.unsafe {
		return nil
	}
	an, err := parser.AnalyzeLexically(string(q), t.m.db, opts, tooLong.Error())
	if err != nil || !lexicalKinds[an.LexKind] {
		return nil
	}
	return an
}

// unparsed is the analysis of a text the analyser failed on.
func unparsed(log *zap.Logger, sql, db string, err error) *parser.Analysis {
	log.Warn("analysis failed; treating the statement as unparsed", zap.Error(err))
	return &parser.Analysis{SQL: sql, DB: db, Unparsed: true, ParseError: err.Error()}
}

// analyze returns the facts of a query text, from the cache; nil when no
// rule could apply, so unguarded traffic pays no parse.
func (t textReader) analyze(q []byte) *parser.Analysis {
	if !t.srv.needsFacts() {
		if mayChangeDB(q) {
			t.be.dbDirty = true
		}
		t.m.stale = true
		return nil
	}
	return t.analyzeText(string(q))
}

// scanAs runs f, a lexical scan made before the statement is analysed,
// under the session's reading of text (readings); when lockproxy does not
// know the session's state and the readings the text allows disagree,
// under the state read from the server (parseOptions), which only such
// texts pay for.
func scanAs[T comparable](s *session, text string, f func(parser.ScanOptions) (T, bool)) (T, bool) {
	rs := s.reading.readings(text, s.be)
	v, ok := f(rs[0])
	for _, o := range rs[1:] {
		if w, wok := f(o); w != v || wok != ok {
			po := s.text().options()
			return f(parser.ScanOptions{Mode: po.Mode, Charset: s.reading.charset, ServerVersion: po.ServerVersion})
		}
	}
	return v, ok
}

// isShow is a cheap test for a statement starting with SHOW, after any
// comments MariaDB skips.
func isShow(q []byte) bool {
	q = skipComments(q)
	i := 0
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r') {
		i++
	}
	return len(q)-i > 4 && (q[i]|0x20) == 's' && (q[i+1]|0x20) == 'h' && (q[i+2]|0x20) == 'o' && (q[i+3]|0x20) == 'w'
}

// mayChangeDB reports whether the text q may run a USE: a statement of
// it starts with the word USE in some reading the text's bytes allow
// (parser.EveryReading: sql_mode and character sets change where strings
// end), executable comments read as code. It is the belt to the server's
// report of the schema (session tracking, which a stored routine may turn
// off) for texts lockproxy does not analyse: a connection whose database
// may have changed is not given back to the pool as it is.
func mayChangeDB(q []byte) bool {
	if !hasFoldedUse(q) {
		return false
	}
	text := string(q)
	for _, o := range parser.EveryReading(text) {
		if startsWithUse(text, o) {
			return true
		}
	}
	return false
}

// hasFoldedUse reports whether q holds "use" in any case as a word of
// its own (no name byte on either side): a text without one runs no USE,
// and one that names only users or causes pays for no scan.
func hasFoldedUse(q []byte) bool {
	for i := 0; i+2 < len(q); i++ {
		if q[i]|0x20 == 'u' && q[i+1]|0x20 == 's' && q[i+2]|0x20 == 'e' &&
			(i == 0 || !parser.IsWordByte(q[i-1])) && (i+3 == len(q) || !parser.IsWordByte(q[i+3])) {
			return true
		}
	}
	return false
}

// startsWithUse reports whether a statement of text, read under o, starts
// with the word USE.
func startsWithUse(text string, o parser.ScanOptions) bool {
	sc := parser.NewScanner(text, o)
	start := true
	for {
		t, ok := sc.Next()
		if !ok {
			return false
		}
		switch t.Kind {
		case parser.TokenSpace, parser.TokenComment, parser.TokenExecStart, parser.TokenExecEnd:
			continue
		case parser.TokenWord:
			if start && strings.EqualFold(text[t.Start:t.End], "use") {
				return true
			}
		case parser.TokenPunct:
			if text[t.Start] == ';' {
				start = true
				continue
			}
		}
		start = false
	}
}
