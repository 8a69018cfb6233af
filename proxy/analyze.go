package proxy

// Statement analysis: the parser's facts for a text, by its shape when
// the shape's analysis can be reused, lexically when the text is past
// what the parser takes.

import (
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// analyzeQuery is analyze for a COM_QUERY text, by its shape where it has
// one (parser.Cache.AnalyzeShaped): a text that differs from one analysed
// before only in integer literals compared or assigned with `=` comes back
// as the analysis of the shape, with params binding its placeholders to
// the text's literals, and is not parsed again; sql is then the text
// itself. params is nil when an is the text's own analysis: in a client
// character set where a backslash may end a multi-byte character, and for
// a shape whose plan needs the text (Server.textShapes).
func (s *session) analyzeQuery(q []byte) (an *parser.Analysis, params []any, sql string) {
	if !s.srv.needsFacts() {
		return s.analyze(q), nil, ""
	}
	opts := s.parseOptions() // first: it may learn a new character set or database
	if s.reading.unsafe {
		return s.analyze(q), nil, ""
	}
	sql = parser.PlainBlanks(string(q), s.reading.charset, opts.Mode)
	an, params, err := s.srv.analyzer.AnalyzeShaped(sql, s.reading.db, opts)
	if err != nil {
		return unparsed(s.log, sql, s.reading.db, err), nil, sql
	}
	if params != nil {
		if rs, ok := s.srv.textShapes.Peek(an); ok && rs == s.srv.ruleSet() {
			return s.analyzeText(sql), nil, sql
		}
	}
	return an, params, sql
}

// analyzeText is analyze for a text already a string, when facts are
// needed.
func (s *session) analyzeText(sql string) *parser.Analysis {
	opts := s.parseOptions() // first: it may learn a new database
	sql = parser.PlainBlanks(sql, s.reading.charset, opts.Mode)
	an, err := s.srv.analyzer.AnalyzeWith(sql, s.reading.db, opts)
	if err != nil {
		return unparsed(s.log, sql, s.reading.db, err)
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
func (s *session) analyzeLexically(q []byte, tooLong error) *parser.Analysis {
	opts := s.parseOptions() // first: it may learn a new character set or database
	if s.reading.unsafe {
		return nil
	}
	an, err := parser.AnalyzeLexically(string(q), s.reading.db, opts, tooLong.Error())
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
func (s *session) analyze(q []byte) *parser.Analysis {
	if !s.srv.needsFacts() {
		if mayChangeDB(q) {
			s.be.dbDirty = true
		}
		s.reading.stale = true
		return nil
	}
	return s.analyzeText(string(q))
}
