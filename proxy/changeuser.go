package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// changeUser serves COM_CHANGE_USER: it authenticates the new user against
// the scramble of the initial handshake, then pins a backend connection
// opened with the new user's credentials. The old connection goes back to
// the pool, which resets it (rolling back any transaction, dropping
// statements). A change refused for its credentials leaves the connection
// as MariaDB leaves it (see failedChangeUser).
func (s *session) changeUser(p []byte) error {
	user, auth, db, plugin, collation, err := parseChangeUser(p, s.client.caps)
	if err != nil {
		return s.writeErrAt(1, errorf(errHandshake, "malformed COM_CHANGE_USER"))
	}
	previous, prevPassword, prevStage1, prevRelayed, prevPassed := s.user, s.client.password, s.client.stage1, s.client.relayed, s.client.passed
	s.srv.setUser(s, user)
	// The exchange may take more packets (a plugin switch, full
	// authentication): the client gets as long as for a login.
	_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.config().Proxy.HandshakeTimeout.D()))
	seq, err := s.authenticate(1, plugin, auth, s.srv.authPlugin, db, collation)
	_ = s.conn.SetReadDeadline(time.Time{})
	s.forgetIdleDeadline()
	var refused *sqlError
	if errors.Is(err, errAccessDenied) || errors.Is(err, errHostBlocked) || errors.As(err, &refused) && refused.State == "28000" {
		// MariaDB's own refusal of a login it judged counts as one too.
		s.srv.setUser(s, previous)
		return s.failedChangeUser()
	}
	if err != nil {
		return err
	}
	if err := s.srv.userRoom(s, user); err != nil {
		if s.passed != nil {
			s.srv.pool.put(s.passed) // closed: no one else may use its login
			s.passed = nil
		}
		s.srv.setUser(s, previous)
		s.client.password, s.client.stage1, s.client.relayed, s.client.passed = prevPassword, prevStage1, prevRelayed, prevPassed
		if werr := s.writeErrAt(seq, err); werr != nil {
			return werr
		}
		return s.failedChangeUser()
	}
	clear(prevStage1) // the previous user's connections keep their own copy
	// MariaDB rolls the transaction back: the locks go once the old
	// connection's reset has done so, before the new user runs anything.
	old := s.be
	s.be = nil
	s.pub.watched.Store(nil)
	s.srv.pool.putSync(old)
	s.releaseLocks()
	s.prep.forgetAll(s.mem)
	clear(s.rwr.beliefs)
	s.rwr.dyn.reset()
	s.route.dropReplica(s.srv.pool)
	s.reading.db = db
	if collation != 0 {
		s.client.collation = collation
	}
	ctx, cancel := context.WithTimeout(s.hardCtx, dialTimeout)
	defer cancel()
	return s.pinBackend(ctx, seq)
}

// failedChangeUser leaves the session as MariaDB leaves a connection whose
// COM_CHANGE_USER it refused (the client already has the error): still
// open, as the previous user in the previous database, with its session
// reset — transaction rolled back, temporary tables, user variables and
// prepared statements gone, session variables back to their defaults.
func (s *session) failedChangeUser() error {
	err := s.be.simpleCommand([]byte{mysql.COM_RESET_CONNECTION})
	if err == nil {
		if terr := s.be.startTracking(true); terr != nil {
			s.be.broken = true
			return terr
		}
	}
	if err != nil && !isMySQLErr(err) {
		s.be.broken = true
		return err
	}
	s.status = s.be.status
	s.releaseLocks() // after the rollback
	s.prep.forgetAll(s.mem)
	clear(s.rwr.beliefs)
	s.rwr.dyn.reset()
	s.route.dropReplica(s.srv.pool)
	s.reading.stale = true
	return err
}

// parseChangeUser decodes a COM_CHANGE_USER payload.
func parseChangeUser(p []byte, caps uint32) (user string, auth []byte, db, plugin string, collation uint8, err error) {
	pos := 1
	if user, pos, err = readNulString(p, pos); err != nil {
		return
	}
	if caps&mysql.CLIENT_SECURE_CONNECTION != 0 {
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			err = errHandshake
			return
		}
		auth, pos = p[pos+1:pos+1+int(p[pos])], pos+1+int(p[pos])
	} else {
		var a string
		if a, pos, err = readNulString(p, pos); err != nil {
			return
		}
		auth = []byte(a)
	}
	if pos < len(p) {
		if db, pos, err = readNulString(p, pos); err != nil {
			return
		}
	}
	if pos+2 <= len(p) {
		collation = uint8(binary.LittleEndian.Uint16(p[pos:]))
		pos += 2
	}
	if caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		if plugin, _, err = readNulString(p, pos); err != nil {
			plugin, err = string(p[pos:]), nil
		}
	}
	return
}

// setUser changes the session's user. The session's own goroutine reads it
// freely; others (SHOW LOCKPROXY LOCKS, /debug/locks) read it under the
// server's mu, so it is written under it.
func (s *Server) setUser(sess *session, user string) {
	s.mu.Lock()
	sess.user = user
	s.mu.Unlock()
}
