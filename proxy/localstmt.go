package proxy

import (
	"github.com/go-mysql-org/go-mysql/mysql"
)

// SHOW LOCKPROXY ... is answered by lockproxy also when a client prepares
// it (mysql2's execute(), mysqli's prepare(), PDO with native prepares,
// Connector/J with useServerPrepStmts): the statement lives in the session
// only, with no backend statement behind it, and each execute answers a
// binary result set made the way the text one is.

// prepareLocal answers COM_STMT_PREPARE of SHOW LOCKPROXY ... and reports
// whether q was one.
func (s *session) prepareLocal(q []byte) (bool, error) {
	if !isShow(q) {
		return false, nil
	}
	st := &stmt{id: s.nextID + 1, query: string(q), local: true}
	s.form = resultForm{prepare: st}
	defer func() { s.form = resultForm{} }()
	done, err := s.showLockproxy(q)
	if done && s.stmts[st.id] == st {
		s.nextID++
	}
	return done, err
}

// executeLocal answers COM_STMT_EXECUTE of a statement lockproxy answers
// itself.
func (s *session) executeLocal(st *stmt) error {
	s.form = resultForm{binary: true}
	defer func() { s.form = resultForm{} }()
	if _, err := s.showLockproxy([]byte(st.query)); err != nil {
		return err
	}
	return nil
}

// localStmtCommand answers COM_STMT_RESET (OK) and COM_STMT_FETCH (no
// cursor: an error, as MariaDB answers a fetch without one) for a
// statement lockproxy answers itself.
func (s *session) localStmtCommand(p []byte) error {
	if p[0] == mysql.COM_STMT_RESET {
		if _, err := s.cw.writePacket(1, okPayload(0, 0, s.status, 0, s.caps&mysql.CLIENT_SESSION_TRACK != 0)); err != nil {
			return err
		}
		return s.cw.flush()
	}
	return s.unknownStmt(p, "mysqld_stmt_fetch")
}
