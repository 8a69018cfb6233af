package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// Prepared statements under multiplexing. A multiplexing session's
// prepared statements do not pin it: the client keeps the ids lockproxy
// gave them, and each is found on, or prepared again from its text on,
// whichever primary connection the session holds when it is next used
// (muxState.ready), with its parameter types bound again on its first
// execute there (bindOnPrimary). A connection keeps the statements
// prepared on it in its pool's state (no SET replayed, no other state)
// for every session lent it after (backendConn.stmts, up to
// maxConnStmts): a statement a session prepared is found there by its
// text and database, with no round trip. One it cannot keep so makes the
// connection be reset when given back, which drops it on the server, as
// does every reset.
//
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
	st.primaryTyped, st.currentTyped, st.shared = false, false, false
}

// connStmtKey names a statement a connection keeps: the database it was
// prepared in and its text.
type connStmtKey struct{ db, query string }

// connStmt is a statement a connection keeps: its id there and how many
// parameters it takes.
type connStmt struct {
	id     uint32
	params int
}

// maxConnStmts bounds the statements a connection keeps for the sessions
// lent it: MariaDB's max_prepared_stmt_count (16382 by default) bounds
// all connections' together.
const maxConnStmts = 64

// shareStmt keeps id, prepared on b in db from query while b was in its
// pool's state, for every session lent b after; false when it cannot
// (b keeps as many as it may, or another of that text).
func (b *backendConn) shareStmt(db, query string, id uint32, params int) bool {
	k := connStmtKey{db, query}
	if _, ok := b.stmts[k]; ok || len(b.stmts) >= maxConnStmts {
		return false
	}
	if b.stmts == nil {
		b.stmts = make(map[connStmtKey]connStmt)
	}
	b.stmts[k] = connStmt{id: id, params: params}
	return true
}

// keepPrepared takes st, which the client has just prepared on be in
// database db, into be's statements for the sessions lent be after, or
// makes be be reset when given back. When be keeps a statement of that
// text already, st uses it and the one just prepared is closed: the
// client's id stays lockproxy's either way.
func (m *muxState) keepPrepared(st *stmt, be *backendConn, db string) {
	if len(m.sets) == 0 {
		if cs, ok := be.stmts[connStmtKey{db, st.query}]; ok && cs.params == st.numParams {
			be.closeStmt(st.backendID)
			st.backendID, st.shared = cs.id, true
			return
		}
		st.shared = be.shareStmt(db, st.query, st.backendID, st.numParams)
	}
	if !st.shared {
		m.changed = true // reset when given back, which drops it
	}
}

// prepareAgain reads the first packet of be's answer to a client's
// prepare, sent on the lent connection be: when the server refused it
// for its max_prepared_stmt_count while be keeps statements for the
// sessions lent it (which a client's close does not close on the server,
// so directly the prepare would have had room), the refusal is consumed,
// be closes what it keeps, and the caller sends the prepare again (true).
func (m *muxState) prepareAgain(be *backendConn, p *pool) (bool, error) {
	if !m.on {
		return false, nil
	}
	h, err := be.r.r.Peek(7)
	if err != nil {
		return false, err
	}
	if h[4] != mysql.ERR_HEADER || binary.LittleEndian.Uint16(h[5:]) != erMaxPreparedStmts {
		return false, nil
	}
	// The statements the idle connections keep count too (a session
	// borrows another connection when the one it gave back is being
	// reset).
	dropped := p.dropIdleStmts()
	if len(be.stmts) == 0 && dropped == 0 {
		return false, nil // the client's own: its answer is MariaDB's
	}
	if _, err := be.read(); err != nil {
		return false, err
	}
	// The session's other statements of this loan may have been among
	// them: they are looked up again as on a new loan.
	be.dropStmts()
	m.loan++
	m.changed = true
	return true, nil
}

// dropIdleStmts makes the idle connections close the statements they
// keep, when the server refused a prepare for its max_prepared_stmt_count,
// and returns how many they closed.
func (p *pool) dropIdleStmts() int {
	p.mu.Lock()
	var took []*backendConn
	for k, list := range p.idle {
		kept := list[:0]
		for _, b := range list {
			if len(b.stmts) > 0 {
				took = append(took, b)
			} else {
				kept = append(kept, b)
			}
		}
		p.idle[k] = kept
	}
	p.mu.Unlock()
	n := 0
	for _, b := range took {
		n += len(b.stmts)
		b.dropStmts()
		p.keep(b)
	}
	return n
}

// prepareIn prepares q on b in database db, where b is in database back,
// and brings b back there. A refusal to enter db (dropped since) or of
// the prepare is the server's answer; a connection that cannot go back
// is broken.
func (b *backendConn) prepareIn(db, back, q string) (uint32, int, error) {
	if err := b.simpleCommand(append([]byte{mysql.COM_INIT_DB}, db...)); err != nil {
		return 0, 0, err
	}
	id, params, err := b.prepareCounted(q)
	if berr := b.simpleCommand(append([]byte{mysql.COM_INIT_DB}, back...)); berr != nil {
		b.broken = true
		return 0, 0, fmt.Errorf("proxy: returning to database %q after preparing a statement in %q: %w", back, db, berr)
	}
	return id, params, err
}

// dropStmts closes the statements b keeps (COM_STMT_CLOSE has no answer).
func (b *backendConn) dropStmts() {
	for _, cs := range b.stmts {
		b.closeStmt(cs.id)
	}
	b.stmts = nil
}

// ready makes sure st has a copy on be, the primary connection lent to
// the session in database db, when the copy it had went with an earlier
// loan: the statement be keeps of that text, or one prepared again
// there; reprepared counts those prepares.
func (m *muxState) ready(st *stmt, be *backendConn, db string, p *pool, reprepared prometheus.Counter) error {
	m.onLoan(st)
	if st.backendID != 0 {
		return nil
	}
	if st.setsGen != m.setsGen || st.db != db && (st.db == "" || db == "") {
		return errorf(errStateElsewhere, "prepared statement %d was prepared under another database or other session variables than the session has now, and backends.pool.multiplex runs it on another connection, where the server would read its text under the new ones; prepare it again", st.id)
	}
	// A statement prepared in another database than the session's now
	// is prepared again in that one, as MariaDB read it (its tables are
	// the ones it named there), and the connection goes back to db.
	prepare := func() (uint32, int, error) {
		if st.db == db {
			return be.prepareCounted(st.query)
		}
		return be.prepareIn(st.db, db, st.query)
	}
	// A connection's statements were prepared in its pool's state: a
	// session that replays SETs reads its texts otherwise.
	pooled := len(m.sets) == 0
	id, params, shared := uint32(0), 0, false
	if cs, ok := be.stmts[connStmtKey{st.db, st.query}]; ok && pooled {
		id, params, shared = cs.id, cs.params, true
	} else {
		var err error
		id, params, err = prepare()
		var me *sqlError
		if errors.As(err, &me) && me.Code == erMaxPreparedStmts && (p.dropIdleStmts() > 0 || len(be.stmts) > 0) {
			// The server's max_prepared_stmt_count: give back what this
			// connection and the idle ones keep for others, and try
			// once more.
			// The session's other statements of this loan may have been
			// among them: they are looked up again as on a new loan.
			be.dropStmts()
			m.loan++
			st.loan = m.loan
			m.changed = true
			id, params, err = prepare()
		}
		if err != nil {
			return err
		}
		reprepared.Inc()
		shared = pooled && be.shareStmt(st.db, st.query, id, params)
		if !shared {
			m.changed = true // reset when given back, which drops it
		}
	}
	if params != st.numParams {
		return errorf(errStateElsewhere, "prepared statement %d takes %d parameters when prepared again on another connection (backends.pool.multiplex), not %d: its tables changed; prepare it again", st.id, params, st.numParams)
	}
	st.backendID, st.shared = id, shared
	return nil
}

// stmtReady is muxState.ready for st on the session's primary connection;
// ok is false when lockproxy answered the client instead (err is what the
// command returns): the statement could not be prepared again there.
func (s *session) stmtReady(st *stmt) (ok bool, err error) {
	err = s.mux.ready(st, s.be, s.reading.db, s.srv.pool, s.srv.pool.bounds.m.reprepared)
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
		return errorf(errStateElsewhere, "prepared statement %d reads what the previous statement left on its backend connection (FOUND_ROWS(), ROW_COUNT(), a stored function that may read them), which backends.pool.multiplex gave back: run both in one transaction", st.id)
	}
	m.readsDiagnostics = st.readsDiag
	m.keepsDiag = diagnosticsEffect(st.an, true, false) != diagClears
	m.cmdPins |= st.pins
	m.pins |= m.cmdPins
	return nil
}

// stmtPins are what each execute of a statement analysed as an pins a
// multiplexing session for (as its text would, without replaying SETs:
// their values are parameters), whether it reads what the previous
// statement left (readsLeft) and whether it only reads the diagnostics
// area (readsDiag).
func stmtPins(an *parser.Analysis, rs *rules.RuleSet, db string) (pins pinReason, readsLeft, readsDiag bool) {
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
	return pins, readsPrevious(an.Stmts[0], rs, db) != "", diagnosticsOnly(an)
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
