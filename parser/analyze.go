package parser

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	tidb "github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// ErrInternal is wrapped by the error Analyze returns when analysis itself
// failed (a panic in this package). SQL the parser rejects is not an error:
// it gives an Analysis with Unparsed set. So does SQL on which the TiDB
// parser itself panics (its test driver does for decimal literals of more
// than 81 digits): the text is handled as unparseable, conservatively.
var ErrInternal = errors.New("parser: internal failure")

// errParserPanic reports text on which the TiDB parser panicked.
var errParserPanic = errors.New("parser: the TiDB parser failed on this text")

// parsers pools TiDB parsers: a *tidb.Parser is not safe for concurrent use
// and costs a few KiB to build. Pooling has no effect but speed.
var parsers = sync.Pool{New: func() any { return newTiDBParser() }}

func newTiDBParser() *tidb.Parser {
	p := tidb.New()
	// MariaDB extensions the TiDB grammar knows (privilege names...). The
	// default SQL mode is MySQL's: ANSI_QUOTES off, so "x" is a string.
	p.SetMariaDB(true)
	return p
}

// parse runs the TiDB parser on sql under mode m with a pooled parser.
// The returned slice is the caller's own. A panic inside the parser is
// returned as a parse error (wrapping errParserPanic) and the parser is
// not reused.
func parse(sql string, m Mode) (stmts []ast.StmtNode, perr error) {
	p := parsers.Get().(*tidb.Parser)
	defer func() {
		if r := recover(); r != nil {
			stmts, perr = nil, fmt.Errorf("%w: %v", errParserPanic, r)
			return
		}
		parsers.Put(p)
	}()
	p.SetSQLMode(m.tidb())
	res, _, perr := p.Parse(sql, "", "")
	if perr != nil {
		return nil, perr
	}
	// Parse returns the parser's own result slice, which the next Parse
	// overwrites: copy it.
	return append([]ast.StmtNode(nil), res...), nil
}

// Parse parses sql into fresh ASTs that the caller owns and may modify (the
// rewrite stage does; Facts.Node is shared and must not be modified). A
// parse error is returned as is. Safe for concurrent use.
func Parse(sql string) ([]ast.StmtNode, error) {
	return parse(sql, 0)
}

// ParseMode is Parse under sql_mode flags m (Facts.Mode for the text of a
// Facts). Comments are read the TiDB parser's way: give it text that
// holds none, such as Facts.Text.
func ParseMode(sql string, m Mode) ([]ast.StmtNode, error) {
	return parse(sql, m)
}

// parseAnalyzable parses sql as Analyze does: a text the parser rejects
// only for a noise word it does not know (ROLLBACK WORK TO ...) is parsed
// without it.
func parseAnalyzable(sql string, m Mode) ([]ast.StmtNode, error) {
	stmts, err := parse(sql, m)
	if err != nil {
		if alt, ok := withoutWork(sql, m); ok {
			if retry, err2 := parse(alt, m); err2 == nil {
				return retry, nil
			}
		}
	}
	return stmts, err
}

// Analyze is AnalyzeWith under DefaultOptions: MariaDB's default reading
// of text (no sql_mode flag) on a server of DefaultServerVersion.
func Analyze(sql string, currentDB string) (a *Analysis, err error) {
	return AnalyzeWith(sql, currentDB, DefaultOptions)
}

// AnalyzeWith returns the facts of every statement of sql as a server of
// version o.ServerVersion runs it under sql_mode o.Mode, qualifying
// unqualified table names with currentDB. The text is first read as
// MariaDB reads it: executable comments it runs are expanded, every other
// comment dropped (see Analysis.Uncertain for what this reading cannot
// settle), and the TiDB parser then parses the result under o.Mode. SQL
// the TiDB parser rejects gives an Analysis with Unparsed set (and
// LexTables, LexKind), not an error; an error (wrapping ErrInternal)
// means the analysis itself failed. Safe for concurrent use; the result
// is immutable (see Analysis).
func AnalyzeWith(sql, currentDB string, o Options) (a *Analysis, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, fmt.Errorf("%w: %v", ErrInternal, r)
		}
	}()
	text, why := expand(sql, o)
	if why == "" {
		why = o.Mode.uncertain()
	}
	a = &Analysis{SQL: sql, DB: currentDB, PrimaryHint: hasPrimaryHint(sql, o.Mode), Mode: o.Mode, Uncertain: why}
	parsed, wrapped := analyzable(text, o)
	stmts, perr := parseAnalyzable(parsed, o.Mode)
	if perr != nil {
		a.lexical(text, currentDB, perr.Error())
		return a, nil
	}
	params := indexParams(stmts)
	a.Params = len(params)
	a.Stmts = make([]*Facts, 0, len(stmts))
	base := 0
	db := currentDB
	end := 0 // where the statement's text ends in text (and in sql)
	for i, stmt := range stmts {
		f := analyzeStmt(stmt, db, params, o)
		f.Wrapped = wrapped && i == 0
		f.ParamBase = base
		base += f.Params
		f.PrimaryHint = a.PrimaryHint
		a.Stmts = append(a.Stmts, f)
		// The parser's statement texts are consecutive pieces of text,
		// each with its ";".
		if end >= 0 && strings.HasPrefix(parsed[end:], stmt.Text()) {
			end += len(stmt.Text())
		} else {
			end = -1
		}
		if a.Uncertain == "" && i < len(stmts)-1 && f.MayChangeMode() {
			a.Uncertain = "sql_mode or the client character set may change before a later statement of the text"
			if end > 0 && text[end-1] == ';' && len(text) == len(sql) {
				a.SplitAt = end
			}
		}
		if f.Kind == KindUse {
			// MariaDB runs the rest of the text in the database USE
			// chose (a USE that fails ends the text).
			db = f.UseDB
		}
	}
	return a, nil
}

// analyzable is an expanded text as the parser reads it: the statement
// a SET STATEMENT runs is parsed as itself, the prefix blanked so that
// offsets stay those of the text (setstatement.go); wrapped says there
// was one.
func analyzable(text string, o Options) (parsed string, wrapped bool) {
	inner, ok := setStatementPrefix(text, ScanOptions{Mode: o.Mode, ServerVersion: o.ServerVersion})
	if !ok {
		return text, false
	}
	return strings.Repeat(" ", inner) + text[inner:], true
}

// AnalyzeLexically is AnalyzeWith without the TiDB parser: the text is
// read only as far as a text the parser rejects is (Unparsed, with
// LexTables and LexKind; parseError says why), at a cost in time and
// memory linear in its length, for a text too long to parse.
func AnalyzeLexically(sql, currentDB string, o Options, parseError string) (a *Analysis, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, fmt.Errorf("%w: %v", ErrInternal, r)
		}
	}()
	text, why := expand(sql, o)
	if why == "" {
		why = o.Mode.uncertain()
	}
	a = &Analysis{SQL: sql, DB: currentDB, PrimaryHint: hasPrimaryHint(sql, o.Mode), Mode: o.Mode, Uncertain: why}
	a.lexical(text, currentDB, parseError)
	return a, nil
}

// lexical fills in what an Unparsed analysis knows of text: its kind and
// table names as read by the lexer.
func (a *Analysis) lexical(text, currentDB, parseError string) {
	a.Unparsed = true
	a.ParseError = parseError
	a.LexKind = lexKind(text, a.Mode)
	for _, name := range lexTables(text, a.Mode) {
		a.LexTables = append(a.LexTables, qualifyLex(name, currentDB))
	}
	if a.Uncertain == "" && containsFold(text, "sql_mode") {
		a.Uncertain = "text that cannot be parsed names sql_mode"
	}
}

// withoutWork drops the optional WORK of BEGIN WORK, COMMIT WORK and
// ROLLBACK WORK [TO ...], which the TiDB grammar lacks; ok is false when
// sql is not such a statement.
func withoutWork(sql string, m Mode) (string, bool) {
	l := lexer{s: sql, mode: m}
	first, ok := l.next()
	if !ok || first.punct || first.quoted {
		return "", false
	}
	switch strings.ToLower(first.text) {
	case "begin", "commit", "rollback":
	default:
		return "", false
	}
	second, ok := l.next()
	if !ok || second.punct || second.quoted || !strings.EqualFold(second.text, "work") {
		return "", false
	}
	end := l.i
	return sql[:end-len(second.text)] + sql[end:], true
}

// qualifyLex turns "t" or "db.t" from LexTables into a TableRef.
func qualifyLex(name, currentDB string) TableRef {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return TableRef{Schema: name[:i], Name: name[i+1:]}
	}
	return TableRef{Schema: strings.ToLower(currentDB), Name: name}
}

// indexParams numbers every placeholder of the text in textual order (the
// parser records each one's byte offset in the whole text).
func indexParams(stmts []ast.StmtNode) map[*test_driver.ParamMarkerExpr]int {
	var c paramCollector
	for _, s := range stmts {
		s.Accept(&c)
	}
	if len(c.marks) == 0 {
		return nil
	}
	sort.SliceStable(c.marks, func(i, j int) bool { return c.marks[i].Offset < c.marks[j].Offset })
	idx := make(map[*test_driver.ParamMarkerExpr]int, len(c.marks))
	for i, m := range c.marks {
		idx[m] = i
	}
	return idx
}

type paramCollector struct {
	marks []*test_driver.ParamMarkerExpr
}

func (c *paramCollector) Enter(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		c.marks = append(c.marks, m)
	}
	return n, false
}

func (c *paramCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// analyzeStmt gathers the facts of one parsed statement.
func analyzeStmt(stmt ast.StmtNode, currentDB string, params map[*test_driver.ParamMarkerExpr]int, o Options) *Facts {
	f := &Facts{Node: stmt, Text: strings.Trim(stmt.Text(), " \t\r\n;"), Mode: o.Mode}
	an := &analyzer{f: f, db: strings.ToLower(currentDB), dbAsWritten: currentDB, params: params, budget: workBudget, exactNames: o.CaseSensitiveNames}
	f.Kind = an.classify(stmt)
	f.Diagnostics = diagnostics(stmt)
	f.ReadsDiagnostics = f.ReadsDiagnostics || f.Diagnostics
	switch f.Kind {
	case KindSelect, KindInsert, KindReplace, KindUpdate, KindDelete:
		an.scoped = true
	}
	stmt.Accept(an)
	an.finish()
	switch stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		f.current = new(atomic.Pointer[currentPlan])
		f.PlainBlocks = plainBlocks(stmt)
	}
	if _, ok := stmt.(*ast.UpdateStmt); !ok {
		// Only an UPDATE is ever rewritten from its tree; the others'
		// trees would only pin memory in the cache (several hundred bytes
		// per byte of text).
		f.Node = nil
	}
	return f
}

// Redact returns sql with every literal replaced by "?" (and keywords
// lowercased, whitespace collapsed), for showing a statement whose values
// must not be seen.
func Redact(sql string) string {
	return tidb.Normalize(sql, "ON")
}
