package proxy

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A backend connection that goes away (wait_timeout, KILL, a restart)
// takes the session's transaction, prepared statements, temporary tables,
// user variables and SETs with it, and lockproxy cannot replay them: the
// client connection ends too, as it would on MariaDB, with no ERR packet
// (a client library reads a server ERR carrying 2006 or 2013 as a
// malformed packet). lockproxy never reconnects a session behind its
// client's back; the client's pool opens a new connection.
//
// A backend speaks only when spoken to, so a pinned primary connection
// that is readable while its session waits for a command has been closed
// (or is saying so before it closes). The server checks idle sessions every
// goneCheckEvery, so a pooled client connection is closed soon after its
// backend is and the pool's own liveness check discards it; a session that
// is about to read from a replica checks its primary first, so a dead
// session does not look alive through replica reads.

// goneCheckEvery is how often idle sessions' primary connections are
// checked.
const goneCheckEvery = 250 * time.Millisecond

// peekState is what a backend socket holds while nobody reads it.
type peekState int

const (
	peekNothing peekState = iota // idle and open
	peekData                     // bytes the backend sent unasked (an ERR before it closes)
	peekClosed                   // the backend closed its side
	peekReset                    // the backend reset the connection
)

// peekReadable reports whether the backend socket has anything waiting:
// on an idle connection, the sign that the backend has ended it.
func (b *backendConn) peekReadable() bool { return b.peek() != peekNothing }

var errPrimaryGone = errors.New("proxy: the primary closed the session's connection")

// watchBackends closes the client connection of every idle session whose
// pinned primary connection has gone away, until ctx ends.
func (s *Server) watchBackends(ctx context.Context) {
	t := time.NewTicker(goneCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		list := make([]*session, 0, len(s.sessions))
		for _, sess := range s.sessions {
			list = append(list, sess)
		}
		s.mu.Unlock()
		for _, sess := range list {
			s.closeIfPrimaryGone(sess)
		}
	}
}

// closeIfPrimaryGone closes sess's client connection when the session waits
// for a command and its primary connection is readable. It runs on the
// server's goroutine (or a KILL's: Server.closeKilled): it touches only
// atomics, the backend's socket (a peek that reads nothing) and the
// client socket's Close. It reports false only when the session is idle
// and its primary connection still open.
func (s *Server) closeIfPrimaryGone(sess *session) bool {
	e := sess.pub.idleEpoch.Load()
	be := sess.pub.watched.Load()
	if e%2 == 0 || be == nil {
		return true
	}
	state := be.peek()
	if state == peekNothing {
		return false
	}
	if sess.pub.idleEpoch.Load() != e {
		return true // the session sent a command meanwhile: that is its answer
	}
	s.metrics.backendErrors.WithLabelValues("primary").Inc()
	sess.log.Info("the primary closed the session's connection; closing the client's")
	if state == peekReset {
		resetClose(sess.conn)
		return true
	}
	_ = sess.conn.Close()
	return true
}

// resetClose closes a client connection the way MariaDB drops one whose
// session it ended at wait_timeout: with a reset, so that the client's
// next write fails at once (libmariadb then reports 2006, "server has gone
// away", as it does directly) instead of succeeding into a closed stream.
// A backend that closed normally (KILL) is mirrored by a normal close.
func resetClose(c net.Conn) {
	for { // under TLS, compression
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = nc.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// primaryGone reports, on the session's goroutine between commands,
// whether the pinned primary connection has been closed by the server.
func (s *session) primaryGone() bool {
	if s.be == nil {
		return false
	}
	state := s.be.peek()
	if s.be.r.buffered() > 0 || state != peekNothing {
		s.srv.metrics.backendErrors.WithLabelValues("primary").Inc()
		s.log.Info("the primary closed the session's connection; closing the client's", zap.Bool("before_replica_read", true))
		s.be.broken = true
		s.resetOnClose = state == peekReset
		return true
	}
	return false
}

// published is what a session shows other goroutines, each field atomic:
// eviction (answered), KILL (thread, onReplicaNow), /debug/locks
// (current), shutdown (idle, txnOpen) and the check for closed backends
// (idleEpoch, watched).
type published struct {
	// answered is set once the client has sent a whole handshake
	// response (see Server.evictHandshakeLocked).
	answered atomic.Bool
	// admitted is set once the session logged in and counts against
	// max_connections (Server.admitted), under Server.mu.
	admitted atomic.Bool
	// thread is the backend thread id of the pinned primary connection,
	// for KILL from other sessions.
	thread atomic.Uint32
	// onReplicaNow is the replica connection a command of the session is
	// running on now (nil: none), so KILL reaches that query.
	onReplicaNow atomic.Pointer[replicaRun]
	// current is the text of the statement being served (when analysed),
	// for /debug/locks.
	current atomic.Pointer[string]
	// Published for the Server's shutdown: the session waits for a command
	// (idle) and whether a transaction is open (txnOpen).
	idle    atomic.Bool
	txnOpen atomic.Bool
	// idleEpoch is odd while the session waits for a command and grows
	// by one at each change, and watched is its pinned primary
	// connection: what the server's check for closed backends reads.
	idleEpoch atomic.Uint64
	watched   atomic.Pointer[backendConn]
}

// lend publishes be as the session's primary connection (nil: none).
func (p *published) lend(be *backendConn) {
	p.watched.Store(be)
	var thread uint32
	if be != nil {
		thread = be.threadID
	}
	p.thread.Store(thread)
}
