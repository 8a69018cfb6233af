package proxy

// Admission: accepting client connections, numbering sessions, the
// per-user and per-host room, and evicting unfinished handshakes when
// connections or file descriptors run short.

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"go.uber.org/zap"
)

// Serve accepts connections on ln until Shutdown. It returns nil after a
// shutdown and the accept error otherwise. Called after Shutdown has
// begun, it closes ln and returns nil at once: Shutdown closes only the
// listener it finds, so a Serve that started after it would otherwise
// accept forever.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	rt := s.loaded().router
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.probeVersion(ctx)
	cancel()
	if rt != nil {
		rt.Start(s.ctx)
	}
	go s.refreshSchemaEvery(s.ctx)
	go s.followSchemaChanges(s.ctx)
	go s.watchBackends(s.ctx)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isDraining() {
				return nil
			}
			if !temporaryAccept(err) {
				return err
			}
			// Out of file descriptors (or another passing failure): go on
			// serving, as net/http does. Out of descriptors, closing
			// connections still authenticating frees some at once, and
			// accepting right away keeps the queue of waiting clients
			// (real logins among them) moving; otherwise wait, doubling.
			s.metrics.acceptErrors.Inc()
			if isFDExhaustion(err) && s.evictHandshakes(fdEvictions, "out of file descriptors") > 0 {
				backoff = 0
				continue
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.accept(c)
	}
}

// errDraining is what Ready reports once Shutdown has begun.
var errDraining = errors.New("draining (SIGTERM)")

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// accept starts a session for c. Until it has authenticated, the session
// counts against max_handshakes, and the oldest such session is closed to
// make room when they are all taken; max_connections counts sessions that
// have logged in (see loggedIn).
func (s *Server) accept(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	cfg := s.config()
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		s.metrics.rejected.Inc()
		go refuse(c, toSQLError(errorf(errTooManyConnections, "Too many connections")))
		return
	}
	for len(s.handshaking) >= cfg.Proxy.MaxHandshakes {
		s.evictHandshakeLocked("proxy.max_handshakes reached")
	}
	s.nextSessionIDLocked()
	mem := &sessionMem{global: s.mem, limit: int64(cfg.Proxy.SessionMemory)}
	sio := rawsock.New(c)
	sess := &session{
		srv:     s,
		id:      s.nextID,
		conn:    c,
		cr:      newPacketReader(sio, clientBufSize),
		cw:      newPacketWriter(sio, clientBufSize),
		prep:    stmtTable{stmts: make(map[uint32]*stmt)},
		hardCtx: s.hardCtx,
		mem:     mem,
	}
	sess.cr.mem = mem
	sess.host, _, _ = net.SplitHostPort(c.RemoteAddr().String())
	// WithLazy: the fields are encoded when the session first logs, not for
	// every connection (most never log).
	sess.log = s.log.WithLazy(zap.Uint32("session", sess.id), zap.String("client", c.RemoteAddr().String()))
	sess.txn = txnLocks{svc: &s.lockSvc, session: sess.id, log: sess.log}
	sess.obs = observeState{svc: &s.lockSvc, session: sess.id, log: sess.log}
	s.sessions[sess.id] = sess
	s.handshaking[sess.id] = sess
	s.wg.Add(1)
	s.mu.Unlock()
	s.metrics.connections.Inc()
	s.metrics.handshakes.Inc()
	s.memReturn.opened()
	go func() {
		if !sess.open(s.ctx) {
			s.sessionEnded(sess)
			return
		}
		// The commands are served on a goroutine of their own. The login
		// (TLS, authentication, the backend's login) grows a goroutine's
		// stack to 8 KiB or more, which an idle session would keep until
		// garbage collections shrink it; a fresh goroutine waits for the
		// client's next command on a stack of 4 KiB.
		go func() {
			defer s.sessionEnded(sess)
			sess.serveCommands(s.ctx)
		}()
	}()
}

// sessionEnded forgets a session whose connection is closed.
func (s *Server) sessionEnded(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess.id)
	if _, ok := s.handshaking[sess.id]; ok {
		delete(s.handshaking, sess.id)
		s.metrics.handshakes.Dec()
	}
	if sess.pub.admitted.Load() {
		s.admitted--
	}
	s.mu.Unlock()
	s.metrics.connections.Dec()
	s.memReturn.ended()
	s.wg.Done()
}

// firstSessionID is where lockproxy's connection ids start. MariaDB
// numbers its threads from 1, so ids from 2^31 on never name a backend
// thread: a KILL that reaches MariaDB with a client's id untranslated
// (inside a multi-statement text, dynamic SQL, a routine, any form
// lockproxy does not rewrite) finds no such thread (1094) rather than
// ending an unrelated session whose backend thread has that number.
const firstSessionID = 1 << 31

// nextSessionIDLocked advances s.prep.nextID to a free id in [firstSessionID,
// 2^32), wrapping around (s.mu held).
func (s *Server) nextSessionIDLocked() {
	for {
		s.nextID++
		if s.nextID < firstSessionID {
			s.nextID = firstSessionID
		}
		if _, taken := s.sessions[s.nextID]; !taken {
			return
		}
	}
}

// loggedIn moves an authenticated session out of the handshake count into
// max_connections. It fails with 1040 when max_connections sessions are
// logged in, and with 08S01 when the session was closed meanwhile to make
// room for newer handshakes.
func (s *Server) loggedIn(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.handshaking[sess.id]; !ok {
		return errorf(errHandshake, "Bad handshake: closed to make room for newer connections")
	}
	if s.admitted >= s.config().Proxy.MaxConnections {
		s.metrics.rejected.Inc()
		return errorf(errTooManyConnections, "Too many connections")
	}
	if err := s.userRoomLocked(sess, sess.user); err != nil {
		return err
	}
	delete(s.handshaking, sess.id)
	s.metrics.handshakes.Dec()
	s.admitted++
	sess.pub.admitted.Store(true)
	return nil
}

// userRoom fails with 1203 when user has users[].max_connections sessions
// logged in other than sess.
func (s *Server) userRoom(sess *session, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userRoomLocked(sess, user)
}

func (s *Server) userRoomLocked(sess *session, user string) error {
	limit := 0
	for _, u := range s.config().Users {
		if u.User == user {
			limit = u.MaxConnections
		}
	}
	if limit <= 0 {
		return nil
	}
	n := 0
	for id, other := range s.sessions {
		if _, handshaking := s.handshaking[id]; other != sess && !handshaking && other.user == user {
			n++
		}
	}
	if n < limit {
		return nil
	}
	s.metrics.rejected.Inc()
	return errorf(errTooManyUserConnections, "User %s already has more than 'users[].max_connections' (%d) active connections", user, limit)
}

// fdEvictions is how many connections still authenticating are closed
// when accept runs out of file descriptors.
const fdEvictions = 8

// evictHandshakes closes up to n connections still authenticating (see
// evictHandshakeLocked) and returns how many it closed.
func (s *Server) evictHandshakes(n int, why string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	closed := 0
	for ; closed < n && len(s.handshaking) > 0; closed++ {
		s.evictHandshakeLocked(why)
	}
	return closed
}

// evictHandshakeLocked is evictHandshake with s.mu held. The victim is
// chosen so that a flood of sockets cannot starve real logins: first
// connections that have not yet sent a complete handshake response (a
// real client answers the greeting at once), then those of the client
// address holding the most handshakes, then the oldest (session ids grow
// with time). Its goroutine sees the closed socket and ends.
func (s *Server) evictHandshakeLocked(why string) {
	perHost := make(map[string]int, 8)
	for _, sess := range s.handshaking {
		perHost[sess.host]++
	}
	var victim *session
	for _, sess := range s.handshaking {
		if victim == nil || evictBefore(sess, victim, perHost) {
			victim = sess
		}
	}
	if victim == nil {
		return
	}
	delete(s.handshaking, victim.id)
	s.metrics.handshakes.Dec()
	s.metrics.handshakesEvicted.Inc()
	victim.log.Debug("closing a connection still authenticating", zap.String("reason", why))
	_ = victim.conn.Close()
}

// evictBefore reports whether a should be closed before b.
func evictBefore(a, b *session, perHost map[string]int) bool {
	if aa, ba := a.pub.answered.Load(), b.pub.answered.Load(); aa != ba {
		return !aa
	}
	if perHost[a.host] != perHost[b.host] {
		return perHost[a.host] > perHost[b.host]
	}
	return a.id < b.id
}

// temporaryAccept reports whether an accept error passes with time: file
// descriptors or buffers running out, a connection reset before it was
// accepted, a timeout.
func temporaryAccept(err error) bool {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Temporary() || errno == syscall.ENOBUFS || errno == syscall.ENOMEM
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isFDExhaustion reports whether err is EMFILE or ENFILE.
func isFDExhaustion(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// refuse sends e in place of the greeting and closes c.
func refuse(c net.Conn, e *sqlError) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	w := newPacketWriter(c, 256)
	_, _ = w.writePacket(0, errPayload(e))
	_ = w.flush()
	_ = c.Close()
}
