package proxy

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
)

// request is one statement to serve, a COM_QUERY text or a
// COM_STMT_EXECUTE, once admitted and analysed. Both forms go through the
// one pipeline of serve; what differs between them is asked of the
// request, never decided twice.
type request struct {
	// p is the command as the client sent it (CONNECTION_ID() replaced).
	p []byte
	// st is the prepared statement an execute runs; nil for a text.
	st *stmt
	// an is the statement's analysis; nil when no rule could apply.
	an *parser.Analysis
	// params are an execute's parameter values, or the literals a text's
	// shape binds to its placeholders (then sql is the text itself).
	params []any
	sql    string
	// longSent: the execute's parameters came as long data, which only
	// the primary's copy of the statement holds.
	longSent bool
	// bulk: r is COM_STMT_BULK_EXECUTE of st (bulk.go), which only the
	// primary runs; planned is then its plan, made from every row.
	bulk    bool
	planned *plan
}

// execute reports whether r is a COM_STMT_EXECUTE.
func (r *request) execute() bool { return r.st != nil }

// text is the statement text SHOW LOCKPROXY LOCKS and /debug/locks show.
func (r *request) text() *string {
	switch {
	case r.st != nil:
		return &r.st.query
	case r.params != nil:
		return &r.sql
	}
	return &r.an.SQL
}

// stepParams are the values rewrite and fence read placeholders from. A
// text's plan holds its own values: a shaped text whose rewrite or fence
// needs them was analysed again as itself (servePlan).
func (r *request) stepParams() []any {
	if r.st == nil {
		return nil
	}
	return plainParams(r.params)
}

// statementRun is one statement being served on a session: the request,
// its plan and, when it runs combined, its place among the row's
// statements. The pipeline's stages are its methods (here, and in
// combine*.go, diagnostics.go, routing.go, rewrite*.go and fence.go);
// the session keeps the connection they run on.
type statementRun struct {
	s    *session
	r    request
	pl   plan
	cand combineCandidate // set when it runs combined (combine.go)
}

// serve runs one admitted statement, a text or an execute, through the
// stages docs/architecture.md draws: plan, locks (beforeCommand), rewrite,
// route, fence, send, finish the rewrite, track what the server changed,
// and release what the end of a transaction frees (afterCommand).
func (s *session) serve(r request) error {
	if err := s.pinFor(r); err != nil {
		return s.writeErrAt(1, err)
	}
	x := &statementRun{s: s, r: r}
	x.pl = x.servePlan()
	if x.r.an != nil {
		s.pub.current.Store(x.r.text())
	}
	if err := x.diagnosticsElsewhere(); err != nil {
		if uerr := x.r.unsent(s.be); uerr != nil {
			return uerr
		}
		return s.writeErrAt(1, err)
	}
	s.comb.noteHazard(x.r.an, s.srv.ruleSet(), s.reading.db)
	if cand, ok := x.combinable(); ok {
		x.cand = cand
		return x.serveCombined()
	}
	return x.servePlanned()
}

// servePlanned is serve once the statement is planned: it runs as
// itself, not in a combined batch.
func (x *statementRun) servePlanned() error {
	s := x.s
	mark := s.txn.mark()
	ok, err := s.beforeCommand(x.pl.guard)
	if !ok {
		if err == nil {
			err = x.r.unsent(s.be)
		}
		return err
	}
	if x.pl.guard.seen != nil {
		s.observe(x.pl.guard, x.r.an)
	}
	step := x.serveRewrite()
	if step.reject != nil {
		s.txn.notRun(&s.ex, mark)
		if err := x.r.unsent(s.be); err != nil {
			return err
		}
		return x.refuseUnpaired(step)
	}
	s.ex.cap = step.capture
	defer func() { s.ex.cap = nil }()
	if served, err := x.diagnosticsOnReplica(); served || err != nil {
		return err
	}
	if x.r.replicaMay() && s.route.replicaEligible(s.srv, s.be, inTxn(s.status), x.pl) {
		if served, err := x.onReplica(); served || err != nil {
			if err == nil {
				s.rwr.finishRewrite(&s.ex, step, inTxn(s.status), s.srv.metrics)
			}
			return err
		}
	}
	if x.r.execute() {
		s.srv.metrics.primaryExecute.Inc()
	} else {
		s.srv.metrics.primaryQuery.Inc()
	}
	s.ex.shareOnEnd = mayWrite(x.r.an) && s.srv.sharesWrites()
	s.ex.ddlWord = s.srv.schemaDDL(x.r.an)
	sent, err := x.sendPrimary(step, mark)
	s.ex.shareOnEnd, s.ex.ddlWord = false, false
	if !sent || err != nil {
		if !sent {
			s.txn.notRun(&s.ex, mark)
		}
		return err
	}
	s.route.diagReplica = s.route.diagPrev && keepsReplicaDiagnostics(x.r.an, s.ex.lastOK, s.ex.raised)
	if s.route.lostPrev && diagnosticsEffect(x.r.an, s.ex.lastOK, s.ex.raised) != diagClears {
		s.route.diagLost = true // the area may still be the lost one's
	}
	s.rwr.finishRewrite(&s.ex, step, inTxn(s.status), s.srv.metrics)
	s.track(x.r.an, x.pl)
	s.rwr.dyn.apply(x.pl.dyn, s.ex.lastOK)
	s.route.noteStatement(s.routeEnv(), s.be, x.r.an)
	if s.ex.sharedGTID {
		s.route.needGTID = false // learnt once the primary had answered
	}
	s.ex.sharedGTID = false
	s.afterCommand()
	return nil
}

// servePlan plans the statement. Which rule rewrites or fences a statement depends on
// its shape and the rules, not on its values; a shaped text whose plan
// needs its values (rewrite, fence) is remembered as such and analysed
// again as the text it is.
func (x *statementRun) servePlan() plan {
	s := x.s
	switch {
	case x.r.planned != nil:
		return *x.r.planned
	case x.r.an == nil:
		return plan{} // nothing analysed: no rule or replica needs it
	}
	pl := makePlan(s.planEnv(), x.r.an, x.r.params)
	if x.r.execute() || x.r.params == nil || pl.fromShapeOK() {
		return pl
	}
	if pl.rewrite.rule != nil || pl.fence.rule != nil {
		s.srv.textShapes.Add(x.r.an, s.srv.ruleSet())
	}
	x.r.an, x.r.params = s.text().analyzeText(x.r.sql), nil
	return makePlan(s.planEnv(), x.r.an, nil)
}

// serveRewrite plans the statement's rewrite. An execute with long data is not
// rewritten (its values are on the primary, not in the packet), so nothing
// it touches stays paired.
func (x *statementRun) serveRewrite() rewriteStep {
	s := x.s
	env := rewriteEnv{srv: s.srv, log: s.log, txn: &s.txn, id: s.id, user: s.user, inTxn: inTxn(s.status),
		noBackslash: s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0, unsafeCharset: s.reading.unsafe}
	if !x.r.longSent {
		return s.rwr.planRewrite(env, &s.ex, x.pl, x.r.stepParams(), x.r.execute())
	}
	s.rwr.forgetOthers(x.pl)
	return longDataStep(env, x.pl)
}

// replicaMay reports whether r's form lets a replica serve it: an execute
// with long data has its values on the primary only, and one that opens a
// cursor reads its rows later, from the connection that ran it.
func (r request) replicaMay() bool {
	return !r.execute() || !r.bulk && !r.longSent && r.p[5]&cursorTypeBits == 0
}

// notRun gives back the locks a statement took after mark when lockproxy
// answered it itself after taking them: none of it ran.
func (t *txnLocks) notRun(x *exchange, mark int) {
	x.giveBack = giveBack{}
	if t.locks != nil {
		t.releaseSince(mark)
	}
}

// unsent is what a statement lockproxy does not send leaves to undo: the
// long data the primary holds for an execute (see dropLongData).
func (r request) unsent(be *backendConn) error {
	if r.longSent {
		return be.dropLongData(r.st)
	}
	return nil
}

// sendPrimary sends the statement to the primary in the form its plan chose (fenced,
// rewritten, as a current read, or as the client sent it) and relays the
// answer; sent is false when lockproxy answered the client itself.
//
// What it sends as the client wrote it (or as a current read) gives back
// at its end the locks taken after mark that it no longer needs (see
// afterCommand); a fenced or rewritten statement runs lockproxy's own
// statements too, and keeps them until the transaction ends.
func (x *statementRun) sendPrimary(step rewriteStep, mark int) (sent bool, err error) {
	s := x.s
	fs, fenced := s.txn.planFence(x.pl, x.r.stepParams(), step)
	switch {
	case fenced:
		return true, x.runFenced(fs)
	case step.sql != "":
		// The guarded UPDATE runs in place of the client's command (an
		// UPDATE answers OK or ERR, alike in both protocols: the text
		// form stands in for a prepared execution too), and the client
		// gets the backend's OK or error or, when the UPDATE changed no
		// row because its guard held, what the rule's on_conflict says.
		reply, done, err := x.sendUpdate(step.sql)
		if done {
			return true, err
		}
		return true, x.answerGuarded(step, reply)
	}
	s.ex.armGiveBack(x.pl.guard, mark)
	p, bin := x.r.p, x.r.execute()
	switch {
	case len(x.pl.currentRead) > 0 && !x.r.execute():
		text, ok := currentReadText(x.pl, x.r.sql, x.r.params != nil)
		if !ok {
			return false, s.writeErrAt(1, errorf(errRejected, "rule %s: this read in a transaction takes row locks and runs as a current read, which lockproxy could not make of its text", x.pl.guard.rule))
		}
		p = append([]byte{mysql.COM_QUERY}, text...)
	case len(x.pl.currentRead) > 0:
		s.mux.onLoan(x.r.st)
		if p, err = x.currentReadPacket(); p == nil {
			return false, err
		}
	case !x.r.execute():
	case x.r.bulk:
		if ok, err := s.stmtReady(x.r.st); !ok {
			return false, err
		}
		p = x.r.st.bulkOnPrimary(x.r.p)
		x.r.st.execID = x.r.st.backendID
	default:
		if ok, err := s.stmtReady(x.r.st); !ok {
			return false, err
		}
		var refused error
		if p, refused = x.r.st.bindOnPrimary(x.r.p); refused != nil {
			return false, s.writeErrAt(1, refused)
		}
		binary.LittleEndian.PutUint32(p[1:], x.r.st.backendID)
		x.r.st.execID = x.r.st.backendID
	}
	if x.r.execute() && !x.r.bulk {
		x.r.st.cursor = x.r.p[5]&cursorTypeBits != 0 // its fetches read this connection
	}
	// Sent as the client sent it: the locks its end frees are given
	// back as soon as the backend has answered, before the answer
	// reaches the client (exchange.releaseEarly).
	s.ex.releaseEarly = true
	defer func() { s.ex.releaseEarly = false }()
	return true, s.forward(p, relayResults, bin)
}

// currentReadPacket is the execute packet of the statement's current-read twin (see
// currentread.go); nil when lockproxy answered the client itself (err is
// the answer's) or the primary connection failed.
func (x *statementRun) currentReadPacket() ([]byte, error) {
	s := x.s
	if x.r.longSent {
		// The long data is bound to the client's statement, not to its
		// current-read twin.
		return nil, s.notExecuted(x.r.st, true, errorf(errRejected, "rule %s: this read in a transaction takes row locks (read_in_txn) and runs as a current read, which cannot take parameters sent as long data; send them in the execute", x.pl.guard.rule))
	}
	twin := x.r.st.currentID
	q, err := x.r.st.currentReadExecute(s.be, s.reading.db, x.pl, x.r.p)
	if twin == 0 && x.r.st.currentID != 0 {
		s.mux.changed = true // a multiplexed connection is reset when given back, dropping it
	}
	if err != nil {
		if isMySQLErr(err) || isKindError(err) {
			return nil, s.writeErrAt(1, err)
		}
		return nil, s.backendFailed(s.be, err)
	}
	x.r.st.execID = x.r.st.currentID
	return q, nil
}
