package proxy

// SHOW LOCKPROXY ... and KILL <id> are answered by lockproxy also when a
// client prepares them (mysql2's execute(), mysqli's prepare(), PDO with
// native prepares, Connector/J with useServerPrepStmts): the statement
// lives in the session only, with no backend statement behind it. Each
// execute of a SHOW answers a binary result set made the way the text one
// is; each execute of a KILL translates lockproxy's id as the text KILL
// does (a KILL prepared on the backend would take the id for a backend
// thread id).

// prepareLocal answers COM_STMT_PREPARE of SHOW LOCKPROXY ... or of
// KILL <id> and reports whether q was one.
func (s *session) prepareLocal(q []byte) (bool, error) {
	if isKill(q) {
		if _, _, _, ok := readKill(q); ok {
			st := &stmt{id: s.prep.nextID + 1, query: string(q), local: true}
			s.prep.nextID++
			s.ex.form = resultForm{prepare: st}
			defer func() { s.ex.form = resultForm{} }()
			return true, s.writeResult(nil, nil)
		}
		return false, nil
	}
	if !isShow(q) {
		return false, nil
	}
	st := &stmt{id: s.prep.nextID + 1, query: string(q), local: true}
	s.ex.form = resultForm{prepare: st}
	defer func() { s.ex.form = resultForm{} }()
	done, err := s.showLockproxy(q)
	if done && s.prep.stmts[st.id] == st {
		s.prep.nextID++
	}
	return done, err
}

// executeLocal answers COM_STMT_EXECUTE of a statement lockproxy answers
// itself.
func (s *session) executeLocal(st *stmt) error {
	if hard, query, id, ok := readKill([]byte(st.query)); ok {
		return s.kill(hard, query, id)
	}
	s.ex.form = resultForm{binary: true}
	defer func() { s.ex.form = resultForm{} }()
	if _, err := s.showLockproxy([]byte(st.query)); err != nil {
		return err
	}
	return nil
}
