package proxy

import (
	"encoding/binary"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// What pins a multiplexing session to its primary connection (see
// pool_mux.go): the reasons, and how a statement, the server's status and
// its session-state reports give them.

// pinReason is a set of reasons a multiplexing session keeps its
// primary connection.
type pinReason uint16

// The reasons, each a value of lockproxy_sessions_pinned's reason label.
const (
	pinTransaction       pinReason = 1 << iota // a transaction is open (server status)
	pinAutocommitOff                           // autocommit = 0 (server status)
	pinTemporaryTable                          // CREATE TEMPORARY TABLE
	pinUserVariable                            // SET @v, @v := ..., SELECT ... INTO @v
	pinPreparedStatement                       // SQL-level PREPARE / EXECUTE; long data sent for a prepared statement's next execute
	pinSessionVariable                         // a session variable the server reported changed, SET SESSION ..., SET TRANSACTION, COM_SET_OPTION
	pinUserLock                                // GET_LOCK and the other user-lock functions
	pinLockTables                              // LOCK TABLES, until UNLOCK TABLES
	pinFoundRows                               // SQL_CALC_FOUND_ROWS, FOUND_ROWS()
	pinLastInsertID                            // an insert id the server reported, LAST_INSERT_ID()
	pinDiagnostics                             // the last statement left warnings or an error, until the next command
	pinCursor                                  // HANDLER; a prepared statement's cursor, until it is reset, closed or executed again
	pinKill                                    // KILL run by the server
	pinAccount                                 // SET PASSWORD, ALTER USER, GRANT ...: the session's account may no longer log in as before
	pinUnknown                                 // unparsed, uncertain, CALL, stored functions, other statements, unexplained state
)

// pinReasons names every reason, in the order of their bits.
var pinReasons = []struct {
	bit  pinReason
	name string
}{
	{pinTransaction, "transaction"}, {pinAutocommitOff, "autocommit_off"},
	{pinTemporaryTable, "temporary_table"}, {pinUserVariable, "user_variable"},
	{pinPreparedStatement, "prepared_statement"}, {pinSessionVariable, "session_variable"},
	{pinUserLock, "user_lock"}, {pinLockTables, "lock_tables"}, {pinFoundRows, "found_rows"},
	{pinLastInsertID, "last_insert_id"}, {pinDiagnostics, "diagnostics"}, {pinCursor, "cursor"},
	{pinKill, "kill"}, {pinAccount, "account"}, {pinUnknown, "unknown"},
}

// statusPins are the reasons the server's last status gives.
func statusPins(status uint16) pinReason {
	var r pinReason
	if status&mysql.SERVER_STATUS_IN_TRANS != 0 {
		r |= pinTransaction
	}
	if status&mysql.SERVER_STATUS_AUTOCOMMIT == 0 {
		r |= pinAutocommitOff
	}
	return r
}

// pinFor pins the session for what statement r will leave on its
// connection, before it runs, and refuses a statement that reads what
// the previous statement left on a connection given back since.
func (s *session) pinFor(r request) error {
	switch {
	case !s.mux.on:
		return nil
	case r.execute():
		return s.mux.pinForStmt(r.st)
	}
	an := r.an
	if an == nil && len(r.p) > 0 && r.p[0] == mysql.COM_QUERY {
		an = s.text().lastKnown(string(r.p[1:]))
		s.mux.known = an
	}
	if an != nil && len(an.Stmts) > 0 && len(an.Stmts[0].Calls) > 0 {
		s.ddl.awaitSchema(s.srv) // the routines its DDL made are known
	}
	return s.mux.pinFor(an, s.srv.ruleSet(), s.reading.db)
}

// lastKnown analyses text for what it leaves on its connection when
// nothing else analyses it (no rules, no replicas): under the mode last
// known, without asking the server, whose answer would replace what the
// previous statement left on the connection (FOUND_ROWS()); nil when the
// parser fails.
func (t textReader) lastKnown(text string) *parser.Analysis {
	opts := parser.Options{Mode: t.m.mode, ServerVersion: parser.ServerVersionOf(t.be.version), CaseSensitiveNames: t.m.exactNames}
	an, err := t.srv.analyzer.AnalyzeWith(text, t.m.db, opts)
	if err != nil {
		return nil
	}
	return an
}

// pinFor pins for what the command analysed as an (nil: not analysed)
// leaves on its connection; see session.pinFor.
func (m *muxState) pinFor(an *parser.Analysis, rs *rules.RuleSet, db string) error {
	fresh := m.fresh
	m.fresh = false
	if an == nil || an.Unparsed || an.Uncertain != "" || len(an.Stmts) == 0 {
		if an != nil && an.Unparsed && parser.ShowDiagnostics(an.SQL, an.Mode) {
			m.readsDiagnostics = true
			return nil
		}
		m.cmdPins |= pinUnknown
		if an != nil {
			m.cmdPins = lexicalPins(an.SQL)
		}
		m.pins |= m.cmdPins
		return nil
	}
	first := an.Stmts[0]
	if fresh {
		if what := readsPrevious(first, rs, db); what != "" {
			return errorf(errStateElsewhere, "%s reads what the previous statement left on its backend connection, which backends.pool.multiplex gave back: run both in one transaction or text", what)
		}
	}
	m.readsDiagnostics = diagnosticsOnly(an)
	m.keepsDiag = diagnosticsEffect(an, true, false) != diagClears
	for _, f := range an.Stmts {
		pins := factPins(f)
		if pins&pinSessionVariable != 0 && m.replay(f) {
			pins &^= pinSessionVariable
		}
		m.cmdPins |= pins
		if f.Kind == parser.KindUnlockTables {
			m.unlocks = true
		}
	}
	m.pins |= m.cmdPins
	return nil
}

// readsPrevious names what of f reads what the statement before it left
// on its connection (FOUND_ROWS(), ROW_COUNT(), a stored function that
// may: rules.RuleSet.MayReadPrevious), or "".
func readsPrevious(f *parser.Facts, rs *rules.RuleSet, db string) string {
	switch {
	case f.Effects.FoundRows:
		return "FOUND_ROWS()"
	case f.Effects.RowCount:
		return "ROW_COUNT()"
	case rs.MayReadPrevious(f, db):
		return "a stored function that may read ROW_COUNT() or FOUND_ROWS()"
	}
	return ""
}

// factPins are the reasons one statement pins its session for.
func factPins(f *parser.Facts) pinReason {
	var r pinReason
	e := f.Effects
	if e.UserVarAssign || len(e.UserVars) > 0 || e.SelectInto {
		r |= pinUserVariable
	}
	if e.UserLock {
		r |= pinUserLock
	}
	if e.CalcFoundRows || e.FoundRows {
		r |= pinFoundRows
	}
	if e.LastInsertID {
		r |= pinLastInsertID
	}
	if len(e.SessionVars) > 0 && !onlyAutocommit(e.SessionVars) || e.SetTransaction && e.SetTransactionScope != "global" {
		r |= pinSessionVariable
	}
	if f.Account {
		// Its connections log in again with what the login proved; once
		// the password may have changed, only this one is sure to be in.
		r |= pinAccount
	}
	if f.Impure != "" && !f.Diagnostics && len(f.Impure) > 6 && f.Impure[:6] == "calls " {
		r |= pinUnknown // a stored function, a sequence: what it leaves is unknown
	}
	switch f.Kind {
	case parser.KindSelect, parser.KindInsert, parser.KindReplace, parser.KindUpdate, parser.KindDelete,
		parser.KindBegin, parser.KindCommit, parser.KindRollback, parser.KindRollbackToSavepoint,
		parser.KindSavepoint, parser.KindReleaseSavepoint, parser.KindSet, parser.KindUse,
		parser.KindShow, parser.KindExplain, parser.KindUnlockTables, parser.KindLoadData:
	case parser.KindDDL:
		if !f.ImplicitCommit { // CREATE / DROP TEMPORARY TABLE
			r |= pinTemporaryTable
		}
	case parser.KindLockTables:
		r |= pinLockTables
	case parser.KindOther:
		if !f.Account {
			r |= lexicalPins(f.Text)
		}
	case parser.KindPrepare, parser.KindExecute, parser.KindDeallocate:
		r |= pinPreparedStatement
	default:
		r |= lexicalPins(f.Text)
	}
	return r
}

// lexicalPins names what a statement the parser could not class pins
// for by its first word: KILL, HANDLER (a cursor), else unknown.
func lexicalPins(text string) pinReason {
	t := strings.TrimLeft(text, " \t\r\n(")
	switch {
	case isKill([]byte(t)):
		return pinKill
	case len(t) > 8 && strings.EqualFold(t[:8], "handler "):
		return pinCursor
	}
	return pinUnknown
}

func onlyAutocommit(vars []string) bool {
	for _, v := range vars {
		if v != "autocommit" {
			return false
		}
	}
	return true
}

// noteLent reads, in an OK or EOF of the lent connection's response,
// what pins the session or makes the connection need a reset: an insert
// id, warnings, and the session state the server reports changed.
func (m *muxState) noteLent(p []byte, ok bool) {
	if !m.on || len(p) < 5 {
		return
	}
	if resultWarnings(p, ok) > 0 {
		m.warned = true
	}
	if !ok {
		if binary.LittleEndian.Uint16(p[3:])&mysql.SERVER_SESSION_STATE_CHANGED != 0 {
			m.changed = true
			m.pinUnexplained() // a change with no report of what
		}
		return
	}
	if _, at, _, err := readLenEncInt(p, 1); err == nil {
		if id, _, _, err := readLenEncInt(p, at); err == nil && id != 0 {
			m.pins |= pinLastInsertID
		}
	}
	at, _, state, good := okParts(p)
	if !good {
		m.changed = true
		m.pins |= pinUnknown
		return
	}
	if binary.LittleEndian.Uint16(p[at:])&mysql.SERVER_SESSION_STATE_CHANGED == 0 {
		return
	}
	m.changed = true
	switch r := reportPins(state, m.replaying); r {
	case pinUnknown:
		m.pinUnexplained()
	default:
		m.pins |= r
	}
}

// pinUnexplained pins the session for a change of its state the server
// reported without naming it, unless the command's own statements name a
// reason that lasts (a user variable, a temporary table ...).
func (m *muxState) pinUnexplained() {
	if m.cmdPins&^(pinLockTables|pinDiagnostics) == 0 {
		m.pins |= pinUnknown
	}
}

// reportPins are the reasons a report of session state changes pins for:
// a system variable other than autocommit (whose value the server status
// carries) changed, or a change the report does not name (a user
// variable, a temporary table, a prepared statement) that a schema or
// autocommit change does not explain. The statement's own reasons,
// pinned before it ran, name the common ones; this is the server's word
// for what the text hid. The variables in replaying are the command's own
// SETs, replayed on the session's next connections: they pin nothing.
func reportPins(state []byte, replaying map[string]bool) pinReason {
	var vars, schema, autocommit, change bool
	for pos := 0; pos < len(state); {
		typ := state[pos]
		data, next, err := readLenEncBytes(state, pos+1)
		if err != nil {
			return pinUnknown
		}
		pos = next
		switch typ {
		case trackSchema:
			schema = true
		case trackSystemVariables:
			name, _, err := readLenEncBytes(data, 0)
			if err != nil {
				return pinUnknown
			}
			switch n := string(name); {
			case n == "autocommit":
				autocommit = true
			case replaying[n]: // the command's own SET, replayed
			default:
				vars = true
			}
		case trackStateChange:
			change = true
		default:
			return pinUnknown
		}
	}
	switch {
	case vars:
		return pinSessionVariable
	case change && !schema && !autocommit && len(replaying) == 0:
		// A change no entry names; a command whose SETs are replayed
		// explains one (a variable the report does not track, as
		// tx_isolation).
		return pinUnknown
	}
	return 0
}
