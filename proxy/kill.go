package proxy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// A client has one connection id for its whole life: lockproxy's own, the
// one its greeting gave, which CONNECTION_ID() answers (see
// modeState.ownConnectionID). KILL [QUERY | CONNECTION] <id> and
// COM_PROCESS_KILL take that id (a KILL among other statements of a text
// is served alone, the text run piece by piece: parser.KillCut): lockproxy translates it into the backend
// thread of that session's primary connection (or of its replica
// connection, while a read runs there) and sends the KILL on the asking
// session's own connection to that server, so MariaDB still decides
// whether this user may kill that thread (another user's needs PROCESS /
// CONNECTION ADMIN / SUPER: 1095). MariaDB's answers name the thread; lockproxy
// gives them back naming the client's id. SHOW PROCESSLIST and
// information_schema.PROCESSLIST still list backend thread ids.

// isKill is a cheap test for a statement starting with KILL, after any
// comments MariaDB skips.
func isKill(q []byte) bool {
	q = skipComments(q)
	t := strings.TrimLeft(string(q[:min(len(q), 32)]), " \t\r\n")
	return len(t) > 5 && strings.EqualFold(t[:4], "kill") && (t[4] == ' ' || t[4] == '\t' || t[4] == '\n')
}

// skipComments is q from its first token that is neither white space nor a
// comment MariaDB skips (read by the one scanner; an executable comment is
// such a token), or q itself when its first 4 KiB hold none.
func skipComments(q []byte) []byte {
	if len(q) == 0 || q[0] != '/' && q[0] != '#' && q[0] != '-' {
		return q
	}
	sc := parser.NewScanner(string(q[:min(len(q), 4<<10)]), parser.ScanOptions{})
	for {
		t, ok := sc.Next()
		if !ok {
			return q
		}
		if t.Kind != parser.TokenSpace && t.Kind != parser.TokenComment {
			return q[t.Start:]
		}
	}
}

// readKill reads a KILL lockproxy translates: KILL [HARD | SOFT] [QUERY |
// CONNECTION] <number>. Anything else (an expression id, KILL USER, KILL
// QUERY ID, other text) runs as sent: a client's id that reaches MariaDB
// so names no thread there (see firstSessionID).
func readKill(q []byte) (hard, query bool, id uint64, ok bool) {
	if hard, query, id, ok = parseKillWords(skipComments(q)); ok {
		return hard, query, id, true
	}
	query, id, ok = parseKill(q)
	return false, query, id, ok
}

// parseKillWords reads KILL [HARD | SOFT] [QUERY | CONNECTION] <digits>
// [;] made of words alone (no comments, no expression), MariaDB's forms
// the SQL parser does not know.
func parseKillWords(q []byte) (hard, query bool, id uint64, ok bool) {
	f := strings.Fields(strings.TrimSuffix(strings.TrimRight(string(q), " \t\r\n"), ";"))
	if len(f) < 2 || !strings.EqualFold(f[0], "kill") {
		return false, false, 0, false
	}
	f = f[1:]
	if strings.EqualFold(f[0], "hard") || strings.EqualFold(f[0], "soft") {
		hard, f = strings.EqualFold(f[0], "hard"), f[1:]
	}
	if len(f) == 2 && (strings.EqualFold(f[0], "query") || strings.EqualFold(f[0], "connection")) {
		query, f = strings.EqualFold(f[0], "query"), f[1:]
	}
	if len(f) != 1 || strings.TrimLeft(f[0], "0123456789") != "" {
		return false, false, 0, false
	}
	id, err := strconv.ParseUint(f[0], 10, 64)
	return hard, query, id, err == nil
}

// parseKill reads KILL [QUERY | CONNECTION] <number>.
func parseKill(q []byte) (query bool, id uint64, ok bool) {
	stmts, err := parser.Parse(string(q))
	if err != nil || len(stmts) != 1 {
		return false, 0, false
	}
	k, isKill := stmts[0].(*ast.KillStmt)
	if !isKill || k.Expr != nil || k.TiDBExtension {
		return false, 0, false
	}
	return k.Query, k.ConnectionID, true
}

// replicaRun names a replica connection: the replica and the backend
// thread serving the session there.
type replicaRun struct {
	addr   string
	thread uint32
	nc     net.Conn // closed by Shutdown when its grace is over
}

// kill ends the query or the backend connection of the session with
// lockproxy connection id id. A query running on a replica is killed
// there, on the asking session's own connection to that replica (MariaDB
// decides there whether this user may); KILL CONNECTION also ends a
// replica query that session is running, so the client's connection ends
// at once, as it would on MariaDB.
func (s *session) kill(hard, query bool, id uint64) error {
	answerOK := func() error {
		s.ex.lastOK = true
		if _, err := s.cw.writePacket(1, okPayload(0, 0, s.ex.statusOut(s.status), 0)); err != nil {
			return err
		}
		return s.cw.flush()
	}
	thread, run, ok := s.srv.backendThread(id)
	if !ok {
		if victim := s.srv.lentOut(id); victim != nil {
			if err := s.srv.killIdle(victim, s.user, query, id); err != nil {
				return s.writeErrAt(1, err)
			}
			return answerOK()
		}
		return s.writeErrAt(1, errorf(errUnknownThread, "Unknown thread id: %d", id))
	}
	verb := "KILL CONNECTION "
	if query {
		verb = "KILL QUERY "
	}
	if hard {
		verb = "KILL HARD " + verb[len("KILL "):]
	}
	be := s.be
	if run != nil {
		// KILL CONNECTION ends the replica read as best it can, then the
		// primary connection whatever happened there; KILL QUERY needs
		// the replica.
		rc, err := s.route.replicaConn(s.routeEnv(), s.client.backendKey(s.srv, s.user, s.reading.db), run.addr)
		switch {
		case err != nil:
			s.route.replicaBroken(s.srv, s.log, run.addr, err)
			if query {
				return s.writeErrAt(1, errorf(errReplicaUnreachable,
					"cannot reach replica %s to stop the query of connection %d: %v", run.addr, id, err))
			}
		case query:
			be, thread = rc, run.thread
		default:
			if err := rc.simpleCommand(append([]byte{mysql.COM_QUERY}, fmt.Sprintf("%s%d", verb, run.thread)...)); err != nil && !isMySQLErr(err) {
				s.route.replicaBroken(s.srv, s.log, run.addr, err)
			}
		}
	}
	err := be.simpleCommand(append([]byte{mysql.COM_QUERY}, fmt.Sprintf("%s%d", verb, thread)...))
	var se *sqlError
	switch {
	case err == nil:
		s.status = s.be.status
		if !query {
			s.srv.closeKilled(id, thread)
		}
		return answerOK()
	case errors.As(err, &se):
		// MariaDB's answer, naming the thread by the id the client knows.
		switch se.Code {
		case 1094:
			se = &sqlError{Code: se.Code, State: se.State, Msg: fmt.Sprintf("Unknown thread id: %d", id)}
		case 1095:
			se = &sqlError{Code: se.Code, State: se.State, Msg: fmt.Sprintf("You are not owner of thread %d", id)}
		}
		return s.writeErrAt(1, se)
	case be != s.be:
		s.route.replicaBroken(s.srv, s.log, run.addr, err)
		return s.writeErrAt(1, errorf(errReplicaUnreachable,
			"cannot reach replica %s to stop the query of connection %d: %v", run.addr, id, err))
	default:
		return s.backendFailed(s.be, err)
	}
}

// killCloseWait bounds how long a KILL CONNECTION waits for the ended
// session's primary connection to show its end (closeKilled).
const killCloseWait = 500 * time.Millisecond

// closeKilled closes the client connection of session id, whose primary
// connection a KILL CONNECTION has just ended, as soon as that
// connection's socket shows the end (MariaDB shuts the ended session's
// socket before it answers the KILL): so that, as directly, the client's
// connection is closed by the time the KILL is answered, not at the next
// check of idle sessions (goneCheckEvery). A session running a command
// finds the end itself. A multiplexing session that gave the killed
// connection (backend thread thread) back meanwhile holds none, or
// another, and nothing would end it: its client connection is closed at
// once, as MariaDB ends the session a KILL CONNECTION names.
func (s *Server) closeKilled(id uint64, thread uint32) {
	s.mu.Lock()
	victim := s.sessions[uint32(id)]
	s.mu.Unlock()
	if victim == nil {
		return
	}
	for deadline := time.Now().Add(killCloseWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if victim.pub.thread.Load() != thread {
			s.mu.Lock()
			conn := victim.conn
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		if s.closeIfPrimaryGone(victim) {
			return
		}
	}
}

// backendThread is the backend thread id of session id's primary
// connection, and the replica connection it runs a command on now (nil
// when none).
func (s *Server) backendThread(id uint64) (uint32, *replicaRun, bool) {
	if id > uint64(^uint32(0)) {
		return 0, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[uint32(id)]
	if sess == nil {
		return 0, nil, false
	}
	t := sess.pub.thread.Load()
	return t, sess.pub.onReplicaNow.Load(), t != 0
}

// lentOut is session id when it is open but holds no primary connection
// now: multiplexed (backends.pool.multiplex) and between commands.
func (s *Server) lentOut(id uint64) *session {
	if id > uint64(^uint32(0)) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[uint32(id)]
	if sess == nil || sess.pub.thread.Load() != 0 || s.handshaking[uint32(id)] != nil {
		return nil
	}
	return sess
}

// killIdle ends victim, a session that holds no backend connection, so
// no MariaDB thread to end, for a KILL by user: it runs no query (KILL
// QUERY has nothing to stop) and KILL CONNECTION closes its client
// connection. MariaDB lets a user end the threads of its own user name;
// ending another user's needs a privilege only the server could check on
// a thread, so that is refused, saying why (the error returned).
func (s *Server) killIdle(victim *session, user string, query bool, id uint64) error {
	s.mu.Lock()
	owner, conn := victim.user, victim.conn
	s.mu.Unlock()
	if owner != user {
		return errorf(errKillIdle,
			"connection %d belongs to another user and holds no backend connection now (backends.pool.multiplex), so MariaDB cannot check this KILL", id)
	}
	if !query {
		_ = conn.Close()
	}
	return nil
}
