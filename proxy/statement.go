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

// serve runs one admitted statement, a text or an execute, through the
// stages docs/architecture.md draws: plan, locks (beforeCommand), rewrite,
// route, fence, send, finish the rewrite, track what the server changed,
// and release what the end of a transaction frees (afterCommand).
func (s *session) serve(r request) error {
	if err := s.pinFor(r); err != nil {
		return s.writeErrAt(1, err)
	}
	pl := s.servePlan(&r)
	if r.an != nil {
		s.pub.current.Store(r.text())
	}
	s.comb.noteHazard(r.an, s.srv.ruleSet(), s.reading.db)
	if cand, ok := s.combinable(r, pl); ok {
		return s.serveCombined(r, pl, cand)
	}
	return s.servePlanned(r, pl)
}

// servePlanned is serve once r is planned: r runs as itself, not in a
// combined batch.
func (s *session) servePlanned(r request, pl plan) error {
	mark := s.txn.mark()
	ok, err := s.beforeCommand(pl.guard)
	if !ok {
		if err == nil {
			err = r.unsent(s.be)
		}
		return err
	}
	if pl.guard.seen != nil {
		s.observe(pl.guard, r.an)
	}
	step := s.serveRewrite(r, pl)
	if step.reject != nil {
		s.txn.notRun(&s.ex, mark)
		if err := r.unsent(s.be); err != nil {
			return err
		}
		return s.refuseUnpaired(step)
	}
	s.ex.cap = step.capture
	defer func() { s.ex.cap = nil }()
	if served, err := s.diagnosticsOnReplica(r); served || err != nil {
		return err
	}
	if r.replicaMay() && s.route.replicaEligible(s.srv, s.be, inTxn(s.status), pl) {
		if served, err := s.onReplica(r.p, r.st); served || err != nil {
			if err == nil {
				s.rwr.finishRewrite(&s.ex, step, inTxn(s.status), s.srv.metrics)
			}
			return err
		}
	}
	if r.execute() {
		s.srv.metrics.primaryExecute.Inc()
	} else {
		s.srv.metrics.primaryQuery.Inc()
	}
	s.ex.shareOnEnd = mayWrite(r.an) && s.srv.sharesWrites()
	s.ex.ddlWord = s.srv.schemaDDL(r.an)
	sent, err := s.sendPrimary(r, pl, step, mark)
	s.ex.shareOnEnd, s.ex.ddlWord = false, false
	if !sent || err != nil {
		if !sent {
			s.txn.notRun(&s.ex, mark)
		}
		return err
	}
	s.route.diagReplica = s.route.diagPrev && keepsReplicaDiagnostics(r.an, s.ex.lastOK, s.ex.raised)
	s.rwr.finishRewrite(&s.ex, step, inTxn(s.status), s.srv.metrics)
	s.track(r.an, pl)
	s.rwr.dyn.apply(pl.dyn, s.ex.lastOK)
	s.route.noteStatement(s.routeEnv(), s.be, r.an)
	if s.ex.sharedGTID {
		s.route.needGTID = false // learnt once the primary had answered
	}
	s.ex.sharedGTID = false
	s.afterCommand()
	return nil
}

// servePlan plans r. Which rule rewrites or fences a statement depends on
// its shape and the rules, not on its values; a shaped text whose plan
// needs its values (rewrite, fence) is remembered as such and analysed
// again as the text it is.
func (s *session) servePlan(r *request) plan {
	switch {
	case r.planned != nil:
		return *r.planned
	case r.an == nil:
		return plan{} // nothing analysed: no rule or replica needs it
	}
	pl := makePlan(s.planEnv(), r.an, r.params)
	if r.execute() || r.params == nil || pl.fromShapeOK() {
		return pl
	}
	if pl.rewrite.rule != nil || pl.fence.rule != nil {
		s.srv.textShapes.Add(r.an, s.srv.ruleSet())
	}
	r.an, r.params = s.text().analyzeText(r.sql), nil
	return makePlan(s.planEnv(), r.an, nil)
}

// serveRewrite plans the rewrite of r. An execute with long data is not
// rewritten (its values are on the primary, not in the packet), so nothing
// it touches stays paired.
func (s *session) serveRewrite(r request, pl plan) rewriteStep {
	env := rewriteEnv{srv: s.srv, log: s.log, txn: &s.txn, id: s.id, user: s.user, inTxn: inTxn(s.status),
		noBackslash: s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0, unsafeCharset: s.reading.unsafe}
	if !r.longSent {
		return s.rwr.planRewrite(env, &s.ex, pl, r.stepParams(), r.execute())
	}
	s.rwr.forgetOthers(pl)
	return longDataStep(env, pl)
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

// sendPrimary sends r to the primary in the form its plan chose (fenced,
// rewritten, as a current read, or as the client sent it) and relays the
// answer; sent is false when lockproxy answered the client itself.
//
// What it sends as the client wrote it (or as a current read) gives back
// at its end the locks taken after mark that it no longer needs (see
// afterCommand); a fenced or rewritten statement runs lockproxy's own
// statements too, and keeps them until the transaction ends.
func (s *session) sendPrimary(r request, pl plan, step rewriteStep, mark int) (sent bool, err error) {
	fs, fenced := s.txn.planFence(pl, r.stepParams(), step)
	switch {
	case fenced:
		return true, s.runFenced(fs)
	case step.sql != "":
		// The guarded UPDATE runs in place of the client's command (an
		// UPDATE answers OK or ERR, alike in both protocols: the text
		// form stands in for a prepared execution too), and the client
		// gets the backend's OK or error or, when the UPDATE changed no
		// row because its guard held, what the rule's on_conflict says.
		reply, done, err := s.sendUpdate(step.sql)
		if done {
			return true, err
		}
		return true, s.answerGuarded(step, reply)
	}
	s.ex.armGiveBack(pl.guard, mark)
	p, bin := r.p, r.execute()
	switch {
	case len(pl.currentRead) > 0 && !r.execute():
		text, ok := currentReadText(pl, r.sql, r.params != nil)
		if !ok {
			return false, s.writeErrAt(1, errorf(errRejected, "rule %s: this read in a transaction takes row locks and runs as a current read, which lockproxy could not make of its text", pl.guard.rule))
		}
		p = append([]byte{mysql.COM_QUERY}, text...)
	case len(pl.currentRead) > 0:
		if p, err = s.currentReadPacket(r, pl); p == nil {
			return false, err
		}
	case !r.execute():
	case r.bulk:
		p = r.st.bulkOnPrimary(r.p)
		r.st.execID = r.st.backendID
	default:
		var refused error
		if p, refused = r.st.bindOnPrimary(r.p); refused != nil {
			return false, s.writeErrAt(1, refused)
		}
		binary.LittleEndian.PutUint32(p[1:], r.st.backendID)
		r.st.execID = r.st.backendID
	}
	// Sent as the client sent it: the locks its end frees are given
	// back as soon as the backend has answered, before the answer
	// reaches the client (exchange.releaseEarly).
	s.ex.releaseEarly = true
	defer func() { s.ex.releaseEarly = false }()
	return true, s.forward(p, relayResults, bin)
}

// currentReadPacket is the execute packet of r's current-read twin (see
// currentread.go); nil when lockproxy answered the client itself (err is
// the answer's) or the primary connection failed.
func (s *session) currentReadPacket(r request, pl plan) ([]byte, error) {
	if r.longSent {
		// The long data is bound to the client's statement, not to its
		// current-read twin.
		return nil, s.notExecuted(r.st, true, errorf(errRejected, "rule %s: this read in a transaction takes row locks (read_in_txn) and runs as a current read, which cannot take parameters sent as long data; send them in the execute", pl.guard.rule))
	}
	q, err := r.st.currentReadExecute(s.be, s.reading.db, pl, r.p)
	if err != nil {
		if isMySQLErr(err) || isKindError(err) {
			return nil, s.writeErrAt(1, err)
		}
		return nil, s.backendFailed(s.be, err)
	}
	r.st.execID = r.st.currentID
	return q, nil
}
