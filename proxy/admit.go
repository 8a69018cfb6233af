package proxy

import (
	"encoding/binary"
	"strings"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
)

// Admission: what a statement may cost lockproxy before it is analysed,
// and what a prepared statement may keep afterwards.
//
// The parser allocates 130-270 bytes per byte of statement text (bulk
// INSERTs least, long expressions most), and walks its trees recursively;
// a string or hex literal costs it a few bytes per byte (its value and its
// text), however long: an inlined BLOB of many MiB is cheap to analyse.
// So before a text reaches the parser it must be no longer than
// proxy.max_statement_size, nest parentheses no deeper than
// proxy.max_nesting, and find room in the memory budgets for its parse.

// parseCostPerByte is the memory reserved per byte of text outside
// literals while it is analysed (the most the parser was measured to
// allocate, rounded up).
const parseCostPerByte = 256

// literalCostPerByte is the same per byte inside a quoted literal ('..',
// "..", X'..'): the parser was measured to allocate at most 5 (a quoted
// string with escapes: the lexer's copy, the value, its text; see the
// parser's BenchmarkAnalyzeBlob*), and the proxy keeps a copy of the text.
const literalCostPerByte = 8

// freeParse is the longest text analysed without a reservation: short
// statements are the common case and their parse is small and brief.
const freeParse = 4 << 10

// admitStatement decides whether the statement text q may be analysed. It
// returns the error the client gets instead, or a func that gives back
// the memory reserved for the analysis; call it once the statement has
// been served. Texts are checked only when lockproxy analyses statements
// at all (any rule or replica). The session's mode state, last server
// status and primary connection say how its text reads (admitReading).
func (s *Server) admitStatement(q []byte, m modeState, status uint16, be *backendConn) (release func(), refused error) {
	release = func() {}
	if !s.needsFacts() {
		return release, nil
	}
	p := s.config().Proxy
	if int64(len(q)) > p.MaxStatementSize.Bytes() {
		return release, errorf(errStatementTooLong,
			"statement too long to analyse: %d bytes, over proxy.max_statement_size (%d)", len(q), p.MaxStatementSize)
	}
	tooDeep, literal := textCost(q, p.MaxNesting, m.admitReading(status, be), m.stale)
	if tooDeep {
		return release, errorf(errTooDeepNesting,
			"Too high level of nesting for select: parentheses nest deeper than proxy.max_nesting (%d)", p.MaxNesting)
	}
	if len(q) <= freeParse {
		return release, nil
	}
	// A session analyses one statement at a time, so max_statement_size
	// bounds its share; the process's budget bounds them all.
	cost := int64(len(q)-literal)*parseCostPerByte + int64(literal)*literalCostPerByte
	if !s.mem.take(cost, shareAll) {
		s.metrics.memoryRefused.Inc()
		return release, outOfMemory("analysing a statement", cost)
	}
	return func() { s.mem.give(cost) }, nil
}

// admitReading is how lockproxy's parser will read the session's next
// text: under its sql_mode (NO_BACKSLASH_ESCAPES as the server last
// reported it) and the server's version, bytes alone (the parser knows
// no multi-byte character set), the bytes the session's character set
// reads as white space (latin1's no-break space) read as spaces
// (parser.PlainBlanks).
func (m modeState) admitReading(status uint16, be *backendConn) parser.ScanOptions {
	o := parser.ScanOptions{Mode: m.mode &^ parser.ModeNoBackslashEscapes}
	if parser.BlankByte(m.charset) != 0 {
		o.Charset = m.charset // single-byte: only its white space differs
	}
	if status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0 {
		o.Mode |= parser.ModeNoBackslashEscapes
	}
	if be != nil {
		o.ServerVersion = parser.ServerVersionOf(be.version)
	}
	return o
}

// textCost reports whether parentheses in q, outside string literals,
// quoted names and comments, nest deeper than limit (it stops at the
// first one over), and counts the bytes of q inside string literals
// (quotes included), as o reads the text. Executable comments count as
// code where the server runs them. A text that names sql_mode may change
// the mode midway, and one read under a mode not known for sure (unsure)
// may be read under another: each is read as every mode that changes its
// quotes would read it, and is over if any reading is, and gets the
// smallest literal count (code must not pass for a literal: it costs the
// analysis 32 times more).
func textCost(q []byte, limit int, o parser.ScanOptions, unsure bool) (over bool, literal int) {
	text := unsafe.String(unsafe.SliceData(q), len(q)) // q is not changed while it is read
	over, literal = nesting(text, limit, o)
	if !unsure && !containsFolded(q, "sql_mode") {
		return over, literal
	}
	var flip parser.Mode
	if strings.IndexByte(text, '\\') >= 0 {
		flip |= parser.ModeNoBackslashEscapes
	}
	if strings.IndexByte(text, '"') >= 0 {
		flip |= parser.ModeANSIQuotes
	}
	for _, m := range []parser.Mode{parser.ModeNoBackslashEscapes, parser.ModeANSIQuotes, parser.ModeNoBackslashEscapes | parser.ModeANSIQuotes} {
		if m&flip != m || over {
			continue
		}
		r := o
		r.Mode ^= m
		o2, l2 := nesting(text, limit, r)
		over, literal = over || o2, min(literal, l2)
	}
	return over, literal
}

// nesting is textCost under one reading.
func nesting(text string, limit int, o parser.ScanOptions) (over bool, literal int) {
	depth := 0
	sc := parser.NewScanner(text, o)
	for {
		t, ok := sc.Next()
		if !ok {
			return false, literal
		}
		switch t.Kind {
		case parser.TokenString:
			literal += t.End - t.Start
		case parser.TokenPunct:
			switch text[t.Start] {
			case '(':
				if depth++; depth > limit {
					return true, literal
				}
			case ')':
				depth = max(depth-1, 0)
			}
		}
	}
}

// keepPlan charges a newly prepared statement's analysis to the memory
// budgets. One the budgets cannot hold (a plan may weigh a hundred times
// its text) is not kept: the statement is analysed again at each execute
// (see admitExecute), which costs time instead of memory.
func (st *stmt) keepPlan(m *sessionMem, db string) {
	st.db = db
	if st.an == nil {
		return
	}
	w := parser.Weight(st.an)
	if !m.take(w, sharePlans) {
		st.an, st.unpinned = nil, true
		return
	}
	st.planCost = w
}

// unpinPlan drops the plan an execute of a statement whose plan is not
// kept made for itself (admitExecute).
func unpinPlan(st *stmt) {
	if st.unpinned {
		st.an = nil
	}
}

// uncharge gives back what a statement held of the memory budgets.
func (st *stmt) uncharge(m *sessionMem) {
	m.give(st.planCost + st.longCost + st.textCost)
	st.planCost, st.longCost, st.textCost = 0, 0, 0
}

// forgetAll forgets every prepared statement of the session (the
// backend dropped them).
func (t *stmtTable) forgetAll(m *sessionMem) {
	for _, st := range t.stmts {
		st.uncharge(m)
	}
	clear(t.stmts)
	t.lastPrepared = 0
}

// keepLongData keeps a COM_STMT_SEND_LONG_DATA chunk for key derivation,
// for a parameter the statement has, up to maxLongKey bytes per parameter
// and within the memory budgets. A chunk that does not fit dooms the next
// execute (see admitExecute): its keys could not be derived.
func (st *stmt) keepLongData(m *sessionMem, p []byte) {
	if st.an == nil && !st.unpinned || len(p) < 7 {
		return
	}
	param := int(binary.LittleEndian.Uint16(p[5:]))
	if param >= st.numParams {
		return // MariaDB refuses the execute; nothing to derive from
	}
	chunk := p[7:]
	if st.longCut[param] {
		return // already too long to key: it stays so
	}
	if len(st.long[param])+len(chunk) > maxLongKey {
		// Too long to keep: its key is not known (a prefix could name
		// another row: '000…0001001' is 1001 to an integer column), so
		// the execute is keyed on no value of it (see execute).
		if st.longCut == nil {
			st.longCut = make(map[int]bool)
		}
		st.longCut[param] = true
		kept := int64(len(st.long[param]))
		m.give(kept)
		st.longCost -= kept
		delete(st.long, param)
		return
	}
	if !m.take(int64(len(chunk)), shareAll) {
		st.longLost = true
		return
	}
	if st.long == nil {
		st.long = make(map[int][]byte)
	}
	st.long[param] = append(st.long[param], chunk...)
	st.longCost += int64(len(chunk))
}

// admitExecute prepares an execute of st: it refuses one whose long data
// could not be kept (resetting the statement on the backend so the client
// can send it again), and gives the execute the plan keepPlan did not
// keep. Call the returned func (never nil) when the execute ends: it gives
// back the long data's memory and drops such a plan again.
func (s *session) admitExecute(st *stmt) (done func(), refused error) {
	done = func() {
		s.mem.give(st.longCost)
		st.longCost = 0
		unpinPlan(st)
	}
	if st.longLost || st.longErr != nil {
		refused = st.longErr
		if refused == nil {
			refused = outOfMemory("long data of a prepared statement", maxLongKey)
		}
		st.longLost, st.longErr = false, nil
		st.long, st.longCut, st.longSent = nil, nil, false
		if st.backendID != 0 {
			reset := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_RESET}, st.backendID)
			if err := s.be.writeCommand(reset); err == nil {
				_, _ = s.be.read()
			}
		}
		return done, refused
	}
	if st.unpinned {
		// The plan keepPlan did not keep, for the duration of the
		// execute (unpinPlan drops it again): the statement's text means
		// what it meant under the database current when it was prepared.
		db := s.reading.db
		s.reading.db = st.db
		st.an = s.text().analyze([]byte(st.query))
		s.reading.db = db
	}
	return done, nil
}

// resetLongData forgets the long data of st (COM_STMT_RESET).
func (st *stmt) resetLongData(m *sessionMem) {
	m.give(st.longCost)
	st.long, st.longCut, st.longSent, st.longLost, st.longCost, st.longErr = nil, nil, false, false, 0, nil
}

// bindOnPrimary makes sure the primary's copy of st knows its parameter
// types before it executes. An execute that does not bind them
// (new_params_bound_flag 0) relies on types the server was given before;
// when the statement's earlier executes went to a replica, the primary
// was never given any, and MariaDB 10.11 then crashes converting the
// parameters. Such a packet gets the remembered types bound.
func (st *stmt) bindOnPrimary(p []byte) ([]byte, error) {
	if st.numParams == 0 {
		return p, nil
	}
	if _, bound := executeParamTypes(p, st.numParams); bound {
		st.primaryTyped = true
		return p, nil
	}
	if st.primaryTyped {
		return p, nil
	}
	out, err := withParamTypes(p, st.numParams, st.paramTypes)
	if err != nil || len(out) == len(p) {
		return nil, errorf(errWrongArguments, "Incorrect arguments to mysqld_stmt_execute")
	}
	st.primaryTyped = true
	return out, nil
}
