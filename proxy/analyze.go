package proxy

// Statement analysis: the parser's facts for a text, by its shape when
// the shape's analysis can be reused, lexically when the text is past
// what the parser takes.

import (
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
