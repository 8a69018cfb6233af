package proxy

import (
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// sendUpdate sends an UPDATE lockproxy built (guarded, fenced) on the
// primary in place of the client's command and reads its one reply. An
// OK comes back with the session's status and affected rows updated and
// done false, for the caller to answer; an ERR is relayed to the client,
// and a broken backend handled, with done true and err what the command
// returns.
func (x *statementRun) sendUpdate(sql string) (reply []byte, done bool, err error) {
	s := x.s
	b := s.be
	s.ex.src = b
	if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, sql...)); err != nil {
		return nil, true, s.backendFailed(b, err)
	}
	_, p, err := b.r.readPhysical()
	if err != nil {
		b.broken = true
		return nil, true, s.backendFailed(b, err)
	}
	reply = append([]byte(nil), p...)
	switch {
	case len(reply) == 0:
		b.broken = true
		return nil, true, s.backendFailed(b, errShortPacket)
	case reply[0] == mysql.ERR_HEADER:
		s.ex.lastOK = false
		return nil, true, s.ex.writeReply(s.cw, reply)
	case reply[0] != mysql.OK_HEADER:
		b.broken = true
		return nil, true, s.backendFailed(b, fmt.Errorf("proxy: unexpected reply 0x%x to an update lockproxy built", reply[0]))
	}
	reply = append([]byte(nil), s.tracked(reply, true)...)
	st, _ := okStatus(reply)
	s.status, b.status, s.ex.lastOK = st, st, true
	s.rwr.lastAffected, _, _, _ = readLenEncInt(reply, 1)
	return reply, false, nil
}

// answerGuarded answers a guarded UPDATE whose OK reply is in reply. When
// it changed no row, the guard's locking read (on the same connection,
// inside the same transaction) tells a lost race (the row is there and
// the guard held) from a row that does not exist or already held the new
// value; only a lost race is answered differently from reply.
func (x *statementRun) answerGuarded(step rewriteStep, reply []byte) error {
	s := x.s
	if s.rwr.lastAffected != 0 || step.check == "" {
		return s.ex.writeReply(s.cw, reply)
	}
	b := s.be
	v, err := b.queryValue(step.check)
	s.status = b.status
	if len(reply) > 0 && resultWarnings(reply, false) > 0 {
		// The check replaced the UPDATE's warnings on the connection:
		// what reads them next is refused (diagnosticsElsewhere).
		s.route.diagLost = true
	}
	switch {
	case err == errNoRow || err == nil && string(v) == "1":
		s.be.oweRowCount(s.rwr.lastAffected) // the check, not the UPDATE, ran last
		return s.ex.writeReply(s.cw, reply)
	case isMySQLErr(err):
		// The row could not be read back (a lock wait, a deadlock): the
		// client gets that error, never a silent 0 rows.
		s.ex.lastOK = false
		return s.writeErrAt(1, err)
	case err != nil:
		return s.backendFailed(b, err)
	}
	s.ex.rwConflict = true
	s.srv.metrics.rewrites.WithLabelValues(step.rule, step.mode, rewriteConflicted).Inc()
	s.srv.audit.Info("rewrite conflict: the guarded update changed no row",
		zap.String("rule", step.rule), zap.String("key", step.key), zap.String("mode", step.mode),
		zap.String("guard", step.guard), zap.Bool("zero_rows", step.zero),
		zap.Uint32("session", s.id), zap.String("user", s.user))
	if step.zero {
		s.be.oweRowCount(s.rwr.lastAffected)
		return s.ex.writeReply(s.cw, reply)
	}
	return x.loseRace(step)
}

// loseRace rolls back the transaction whose guarded UPDATE lost its race,
// releases its locks and answers rewrite.on_conflict's error: 1213 (40001,
// retry the transaction) when the value read has since changed, 4025
// (23000, a constraint) when the write would take the column below min.
func (x *statementRun) loseRace(step rewriteStep) error {
	s := x.s
	s.ex.lastOK = false
	ended := "the statement changed nothing"
	if s.status&mysql.SERVER_STATUS_IN_TRANS != 0 {
		if err := s.be.simpleCommand(append([]byte{mysql.COM_QUERY}, "ROLLBACK"...)); err != nil {
			s.be.broken = true
			return err
		}
		s.status = s.be.status
		ended = "transaction rolled back"
	}
	s.releaseLocks()
	s.rwr.forgetTxnBeliefs()
	return s.writeErrAt(1, raceError(step, ended))
}

// raceError is the error a lost race answers (docs: README "Rewriting").
func raceError(step rewriteStep, ended string) error {
	if step.guard == parser.GuardMin {
		return errorf(errConstraint,
			"CONSTRAINT %s >= %s failed for rule %q key %q: the UPDATE would take %s below its min, so it changed no row; %s",
			step.column, step.min, step.rule, step.key, step.column, ended)
	}
	return errorf(errRaceLost,
		"rule %q key %q: %s changed after it was read, so the guarded UPDATE changed no row; %s, try restarting transaction",
		step.rule, step.key, step.column, ended)
}
