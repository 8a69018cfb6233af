package proxy

import (
	"github.com/lockproxy/lockproxy/parser"
	"github.com/prometheus/client_golang/prometheus"
)

// Prepared statements under multiplexing. A multiplexing session's
// prepared statements do not pin it: the client keeps the ids lockproxy
// gave them, and each is prepared again, from its text, on whichever
// primary connection the session holds when it is next used
// (muxState.ready), with its parameter types bound again on its first
// execute there (bindOnPrimary). A connection that held the session's
// statements is reset when given back, which drops them on the server.
// What ties a statement to one connection pins the session until it is
// gone: long data sent for the next execute, a cursor the fetches read
// (stmtTable.holding); and an execute pins it for what the statement's
// text leaves on the connection, as the same text would (stmtPins).
//
// A statement is prepared again only under what it was prepared under:
// the same database and the same replayed SETs (sql_mode and character
// sets change how the server reads its text); after either changed, its
// execute is refused (1105) and the client prepares it again.

// onLoan forgets st's copies on the primary when they were made on a
// connection the session has given back since.
func (m *muxState) onLoan(st *stmt) {
	if !m.on || st.loan == m.loan {
		return
	}
	st.loan = m.loan
	st.backendID, st.currentID, st.execID = 0, 0, 0
	st.primaryTyped, st.currentTyped = false, false
}

// ready makes sure st has a copy on be, the primary connection lent to
// the session in database db, preparing it again there when the copy it
// had went with an earlier loan; reprepared counts those prepares.
func (m *muxState) ready(st *stmt, be *backendConn, db string, reprepared prometheus.Counter) error {
	m.onLoan(st)
	if st.backendID != 0 {
		return nil
	}
	if st.db != db || st.setsGen != m.setsGen {
		return errorf(errStateElsewhere, "prepared statement %d was prepared under another database or other session variables than the session has now, and backends.pool.multiplex runs it on another connection, where the server would read its text under the new ones; prepare it again", st.id)
	}
	id, params, err := be.prepareCounted(st.query)
	if err != nil {
		return err
	}
	if params != st.numParams {
		be.closeStmt(id)
		return errorf(errStateElsewhere, "prepared statement %d takes %d parameters when prepared again on another connection (backends.pool.multiplex), not %d: its tables changed; prepare it again", st.id, params, st.numParams)
	}
	st.backendID = id
	m.changed = true
	reprepared.Inc()
	return nil
}

// stmtReady is muxState.ready for st on the session's primary connection;
// ok is false when lockproxy answered the client instead (err is what the
// command returns): the statement could not be prepared again there.
func (s *session) stmtReady(st *stmt) (ok bool, err error) {
	err = s.mux.ready(st, s.be, s.reading.db, s.srv.pool.bounds.m.reprepared)
	switch {
	case err == nil:
		return true, nil
	case isMySQLErr(err) || isKindError(err):
		return false, s.writeErrAt(1, err)
	}
	return false, s.backendFailed(s.be, err)
}

// pinForStmt pins the session for what an execute of st leaves on its
// connection, before it runs, and refuses one that reads what the
// previous statement left on a connection given back since; see
// muxState.pinFor, which does the same for a text.
func (m *muxState) pinForStmt(st *stmt) error {
	fresh := m.fresh
	m.fresh = false
	if fresh && st.readsLeft {
		return errorf(errStateElsewhere, "prepared statement %d reads what the previous statement left on its backend connection (FOUND_ROWS(), ROW_COUNT()), which backends.pool.multiplex gave back: run both in one transaction", st.id)
	}
	m.readsDiagnostics = st.readsDiag
	m.cmdPins |= st.pins
	m.pins |= m.cmdPins
	return nil
}

// stmtPins are what each execute of a statement analysed as an pins a
// multiplexing session for (as its text would, without replaying SETs:
// their values are parameters), whether it reads what the previous
// statement left (readsLeft) and whether it only reads the diagnostics
// area (readsDiag).
func stmtPins(an *parser.Analysis) (pins pinReason, readsLeft, readsDiag bool) {
	switch {
	case an == nil:
		return pinUnknown, false, false
	case an.Unparsed || an.Uncertain != "" || len(an.Stmts) == 0:
		if an.Unparsed && parser.ShowDiagnostics(an.SQL, an.Mode) {
			return 0, false, true
		}
		return lexicalPins(an.SQL), false, false
	}
	for _, f := range an.Stmts {
		pins |= factPins(f)
	}
	e := an.Stmts[0].Effects
	return pins, e.FoundRows || e.RowCount, diagnosticsOnly(an)
}

// holding are the reasons the session's prepared statements give to keep
// its connection until they are executed, reset or closed: long data
// sent for the next execute, a cursor open for fetches.
func (t *stmtTable) holding() pinReason {
	var r pinReason
	for _, st := range t.stmts {
		if st.longSent {
			r |= pinPreparedStatement
		}
		if st.cursor {
			r |= pinCursor
		}
	}
	return r
}
