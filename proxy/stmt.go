package proxy

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// stmt is a prepared statement as the client knows it. lockproxy hands out
// its own statement ids and maps them to the backend's, so a statement can
// later be prepared on other backends without the client noticing.
type stmt struct {
	id         uint32
	backendID  uint32
	query      string
	numParams  int
	numColumns int
	// paramTypes are the types (2 bytes each) from the last execute that
	// bound them. Clients may re-execute with new_params_bound_flag = 0,
	// reusing these; lockproxy must remember them to read parameter values.
	paramTypes []byte
	// an is the statement's analysis (nil when no rule could apply).
	an *parser.Analysis
	// long holds COM_STMT_SEND_LONG_DATA values (up to maxLongKey bytes
	// each) until the next execute, for deriving lock keys.
	long map[int][]byte
	// longCut are the parameters whose long data outgrew maxLongKey.
	longCut map[int]bool
	// longSent: long data was sent since the last execute; only the
	// primary's statement has it. longErr: the statement could not be
	// prepared again for its long data (multiplexing), which the next
	// execute answers.
	longSent bool
	longErr  error
	// local: lockproxy answers the statement itself (SHOW LOCKPROXY);
	// no backend has it.
	local bool

	// Memory (see admit.go): the budget charged for the plan and for long
	// data; longLost: long data did not fit, so the next execute is
	// refused; unpinned: the plan did not fit and is made at each execute
	// from the text, under db (the database current at prepare).
	planCost, longCost int64
	textCost           int64 // the text's and the statement's own (prepare)
	longLost, unpinned bool
	db                 string
	// primaryTyped: the primary's copy has been given parameter types
	// (see bindOnPrimary).
	primaryTyped bool
	// currentID is the primary's statement that runs this one as a
	// current read (with LOCK IN SHARE MODE; currentread.go), 0 until an
	// execute needs it; currentTyped: it has been given parameter types.
	// execID is the statement the last execute ran, which COM_STMT_FETCH
	// reads a cursor from.
	currentID, execID uint32
	currentTyped      bool

	// Multiplexing (pool_stmt.go): loan is the session's loan of a
	// primary connection its copies there (backendID, currentID) belong
	// to, and setsGen the session's replayed SETs it was prepared under;
	// pins are what each execute pins the session for, readsLeft that it
	// reads what the previous statement left (FOUND_ROWS(), ROW_COUNT()),
	// readsDiag that it only reads the diagnostics area; cursor: its last
	// execute opened a cursor, which the fetches read on that connection.
	loan, setsGen        uint32
	pins                 pinReason
	readsLeft, readsDiag bool
	cursor               bool
	// shared: backendID is a statement of the connection's that other
	// sessions use too (connStmt): closing the client's leaves it.
	shared bool
}

// bindTypes records the parameter types an execute binds: the client
// reuses them in later executes that bind none. Whether this execute
// reaches the primary's copy, its current-read twin, a replica's copy, or
// none of them (lockproxy refused it, or ran it in another form), is
// decided after this; so no copy is taken to know these types until an
// execute carrying them was sent to it (bindOnPrimary, currentReadExecute,
// onReplica mark it), and a later execute without types binds them
// explicitly on a copy that was not told them. Otherwise a refused
// execute would leave lockproxy reading the next one's values with types
// the server never saw.
func (st *stmt) bindTypes(s *session, types []byte) {
	st.paramTypes = append(st.paramTypes[:0], types...)
	st.primaryTyped, st.currentTyped = false, false
	delete(s.route.replica.typed, st.id)
}

// maxLongKey bounds how much long data lockproxy keeps per parameter; a key
// longer than this cannot name a row anyway (InnoDB keys are shorter).
const maxLongKey = 64 << 10

// lastStmtID is the statement id MariaDB reads as "the statement the last
// prepare made" (direct execute: a client sends the prepare and the
// execute together, before it knows the id).
const lastStmtID = 0xFFFFFFFF

func (t *stmtTable) lookup(p []byte) (*stmt, bool) {
	if len(p) < 5 {
		return nil, false
	}
	id := binary.LittleEndian.Uint32(p[1:])
	if id == lastStmtID {
		id = t.lastPrepared
	}
	st, ok := t.stmts[id]
	return st, ok
}

// prepare forwards COM_STMT_PREPARE, gives the statement a proxy id, and
// relays the parameter and column definitions.
func (s *session) prepare(p []byte) error {
	s.prep.lastPrepared = 0 // until this prepare succeeds
	p = s.reading.ownConnectionID(p, s.be, s.id)
	release, refused := s.srv.admitStatement(p[1:], s.reading, s.status, s.be)
	defer release()
	if refused != nil {
		return s.writeErrAt(1, refused)
	}
	if done, err := s.prepareLocal(p[1:]); done {
		return err
	}
	// The statement's text is kept for its whole life (keys, current
	// reads, plans made again): it counts against the budgets as long.
	cost := int64(len(p)-1) + stmtOverhead
	if !s.mem.take(cost, shareAll) {
		s.srv.metrics.memoryRefused.Inc()
		return s.writeErrAt(1, outOfMemory("keeping a prepared statement", cost))
	}
	s.ex.src = s.be
	if err := s.be.writeCommand(p); err != nil {
		s.mem.give(cost)
		return s.backendFailed(s.be, err)
	}
	if again, err := s.mux.prepareAgain(s.be, s.srv.pool); err != nil {
		s.mem.give(cost)
		return s.backendFailed(s.be, err)
	} else if again {
		if err := s.be.writeCommand(p); err != nil {
			s.mem.give(cost)
			return s.backendFailed(s.be, err)
		}
	}
	if err := s.relayPrepare(string(p[1:]), cost); err != nil {
		return s.backendFailed(s.be, err)
	}
	if st := s.prep.stmts[s.prep.lastPrepared]; s.route.diagPrev && st != nil {
		s.route.diagReplica = diagnosticsOnly(st.an) || keepsReplicaDiagnostics(st.an, s.ex.lastOK, s.ex.raised)
	}
	if st := s.prep.stmts[s.prep.lastPrepared]; s.route.lostPrev && st != nil &&
		(diagnosticsOnly(st.an) || diagnosticsEffect(st.an, s.ex.lastOK, s.ex.raised) != diagClears) {
		s.route.diagLost = true
	}
	return nil
}

// stmtOverhead is what lockproxy keeps per prepared statement besides its
// text and plan (the stmt, its map entries, its ids on the backends).
const stmtOverhead = 512

// relayPrepare relays the backend's answer to a prepare of query, whose
// keeping cost was taken from the budgets: an accepted statement holds it
// until closed, a refused one gives it back.
func (s *session) relayPrepare(query string, cost int64) error {
	r := s.responseRelay()
	seq, p, err := r.next()
	if err != nil {
		s.mem.give(cost)
		return err
	}
	if len(p) == 0 || p[0] != mysql.OK_HEADER || len(p) < 12 {
		s.mem.give(cost)
		if err := s.cw.writePhysical(seq, p); err != nil {
			return clientIOError{err}
		}
		s.ex.lastOK = false
		return s.cw.flushClient()
	}
	s.ex.raised = binary.LittleEndian.Uint16(p[10:]) > 0
	s.prep.nextID++
	st := &stmt{
		id:         s.prep.nextID,
		backendID:  binary.LittleEndian.Uint32(p[1:]),
		query:      query,
		numColumns: int(binary.LittleEndian.Uint16(p[5:])),
		numParams:  int(binary.LittleEndian.Uint16(p[7:])),
		textCost:   cost,
	}
	binary.LittleEndian.PutUint32(p[1:], st.id)
	if err := s.cw.writePhysical(seq, p); err != nil {
		return clientIOError{err}
	}
	s.ex.midResponse = true
	defer func() { s.ex.midResponse = false }()
	if st.numParams > 0 {
		if err := r.columns(st.numParams); err != nil {
			return err
		}
	}
	if st.numColumns > 0 {
		if err := r.columns(st.numColumns); err != nil {
			return err
		}
	}
	st.an = s.text().analyze([]byte(query))
	if s.mux.on {
		an := st.an
		if an == nil {
			an = s.text().lastKnown(query)
		}
		s.ddl.awaitSchema(s.srv)
		st.pins, st.readsLeft, st.readsDiag = stmtPins(an, s.srv.ruleSet(), s.reading.db)
		st.loan, st.setsGen = s.mux.loan, s.mux.setsGen
		s.mux.keepPrepared(st, s.be, s.reading.db)
		// IS_USED_LOCK() was given this connection's thread id in the
		// text (ownConnectionID): the session keeps the connection.
		s.mux.pins |= st.pins & pinUserLock
	}
	st.keepPlan(s.mem, s.reading.db)
	s.prep.add(st)
	s.ex.lastOK = true
	return s.cw.flushClient()
}

func (w *packetWriter) flushClient() error {
	if err := w.flush(); err != nil {
		return clientIOError{err}
	}
	return nil
}

// execute serves COM_STMT_EXECUTE: admit it, remember the parameter types
// when the client binds them, decode the values (and long data) the locks
// are keyed from, and serve it.
func (s *session) execute(p []byte) error {
	st, ok := s.prep.lookup(p)
	if !ok {
		return s.writeErrAt(1, unknownStmt(p, "mysqld_stmt_execute"))
	}
	if st.local {
		return s.executeLocal(st)
	}
	if len(p) < 10 { // command, statement id, flags, iteration count
		return s.writeErrAt(1, errorf(errWrongArguments, "Incorrect arguments to mysqld_stmt_execute"))
	}
	done, refused := s.admitExecute(st)
	defer done()
	if refused != nil {
		return s.writeErrAt(1, refused)
	}
	if types, ok := executeParamTypes(p, st.numParams); ok {
		st.bindTypes(s, types)
	} else if st.numParams > 0 && st.paramTypes == nil {
		return s.writeErrAt(1, errorf(errNoParamTypes, "statement %d executed without parameter types: Malformed communication packet", st.id))
	}
	// This execute consumes the long data, whatever becomes of it.
	long, longCut, longSent := st.long, st.longCut, st.longSent
	st.long, st.longCut, st.longSent = nil, nil, false
	var params []any
	if st.an != nil && st.numParams > 0 {
		for i := range longCut {
			if long == nil {
				long = map[int][]byte{}
			}
			long[i] = nil // sent as long data: not in the packet
		}
		var err error
		if params, err = executeParams(p, st.numParams, st.paramTypes, long); err != nil {
			return s.notExecuted(st, longSent, err)
		}
		for i := range longCut {
			if i < len(params) {
				params[i] = rules.Param{Type: rules.ParamOther, Wire: mysql.MYSQL_TYPE_LONG_BLOB}
			}
		}
	}
	return s.serve(request{p: p, st: st, an: st.an, params: params, longSent: longSent})
}

// notExecuted answers an execute lockproxy does not send, and drops the
// long data the backend holds for it (see dropLongData).
func (s *session) notExecuted(st *stmt, longSent bool, e error) error {
	if longSent {
		if err := s.be.dropLongData(st); err != nil {
			return err
		}
	}
	return s.writeErrAt(1, e)
}

// dropLongData resets st on the primary after an execute that was not
// sent: the server keeps long data until an execute, and would otherwise
// bind it to the next one, whose keys lockproxy derives from that
// execute's own packet.
func (b *backendConn) dropLongData(st *stmt) error {
	err := b.simpleCommand(binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_RESET}, st.backendID))
	if err != nil && !isMySQLErr(err) {
		b.broken = true
		return err // the session ends: its statement state is not known
	}
	return nil
}

// executeParamTypes returns the parameter types an execute packet binds, if
// its new_params_bound_flag is set.
func executeParamTypes(p []byte, numParams int) ([]byte, bool) {
	if numParams == 0 {
		return nil, false
	}
	pos := 10 + (numParams+7)/8
	if pos >= len(p) || p[pos] != 1 {
		return nil, false
	}
	pos++
	if pos+2*numParams > len(p) {
		return nil, false
	}
	return p[pos : pos+2*numParams], true
}

// stmtCommand forwards a statement command that names a statement id.
func (s *session) stmtCommand(p []byte, kind relayKind) error {
	st, ok := s.prep.lookup(p)
	if ok && st.local {
		if kind == relayNone {
			return nil
		}
		// A statement lockproxy answers itself: COM_STMT_RESET is
		// answered OK, COM_STMT_FETCH with an error (no cursor), as
		// MariaDB answers a fetch without one.
		if p[0] == mysql.COM_STMT_RESET {
			if _, err := s.cw.writePacket(1, okPayload(0, 0, s.ex.statusOut(s.status), 0)); err != nil {
				return err
			}
			return s.cw.flush()
		}
		return s.writeErrAt(1, unknownStmt(p, "mysqld_stmt_fetch"))
	}
	if !ok {
		if kind == relayNone {
			return nil // MySQL ignores long data for unknown statements
		}
		return s.writeErrAt(1, unknownStmt(p, "mysqld_stmt_fetch"))
	}
	if err := s.mux.ready(st, s.be, s.reading.db, s.srv.pool, s.srv.pool.bounds.m.reprepared); err != nil {
		switch {
		case !isMySQLErr(err) && !isKindError(err):
			return s.backendFailed(s.be, err)
		case kind == relayNone:
			// Long data has no answer: its execute answers the error.
			st.longErr = err
			return nil
		}
		return s.writeErrAt(1, err)
	}
	id := st.backendID
	if kind == relayFetch && st.execID != 0 {
		id = st.execID // the cursor is the last execute's
	}
	binary.LittleEndian.PutUint32(p[1:], id)
	return s.forward(p, kind, true)
}

// closeStmt forwards COM_STMT_CLOSE (which has no response) and forgets it.
func (s *session) closeStmt(p []byte) error {
	st, ok := s.prep.lookup(p)
	if !ok {
		return nil
	}
	delete(s.prep.stmts, st.id)
	if s.prep.lastPrepared == st.id {
		s.prep.lastPrepared = 0
	}
	st.uncharge(s.mem)
	if st.local {
		return nil
	}
	if id, ok := s.route.replica.stmts[st.id]; ok {
		if !s.route.replica.shared[st.id] { // the connection keeps a shared one for others
			q := append([]byte(nil), p...)
			binary.LittleEndian.PutUint32(q[1:], id)
			_ = s.route.replica.conn.writeCommand(q)
		}
		delete(s.route.replica.stmts, st.id)
		delete(s.route.replica.shared, st.id)
	}
	if s.be == nil {
		// Multiplexing, between loans (dispatchLent borrows none for a
		// close): its copies went with the connections given back.
		return nil
	}
	s.mux.onLoan(st)
	st.closeCurrentRead(s.be)
	if st.shared && (st.longSent || st.cursor) {
		// The connection keeps the statement for other sessions: not
		// with this one's long data or cursor.
		return s.be.dropLongData(st)
	}
	if st.backendID == 0 || st.shared {
		return nil // its copy went with a connection given back, or is the connection's
	}
	binary.LittleEndian.PutUint32(p[1:], st.backendID)
	return s.forward(p, relayNone, false)
}

// unknownStmt is MariaDB's error for a command p (given to where) naming
// a statement the session does not have.
func unknownStmt(p []byte, where string) error {
	var id uint32
	if len(p) >= 5 {
		id = binary.LittleEndian.Uint32(p[1:])
	}
	return errorf(errUnknownStmt, "Unknown prepared statement handler (%d) given to %s", id, where)
}

// cursorTypeBits are the bits of COM_STMT_EXECUTE's flags byte that ask
// for a cursor (read only, for update, scrollable). Others do not: go-mysql
// sets 0x08 (PARAMETER_COUNT_AVAILABLE, which MariaDB ignores) whenever a
// statement has parameters.
const cursorTypeBits = 0x07

// stmtTable is the session's prepared statements by the ids the client
// knows them by.
type stmtTable struct {
	stmts  map[uint32]*stmt
	nextID uint32
	// lastPrepared is the id of the statement the last prepare made, 0
	// when it failed or that statement was closed: what MariaDB's direct
	// execute (statement id 0xFFFFFFFF) names.
	lastPrepared uint32
}

// add keeps st, the statement the last prepare made.
func (t *stmtTable) add(st *stmt) {
	t.stmts[st.id] = st
	t.lastPrepared = st.id
}
