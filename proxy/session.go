package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// session is one client connection. All its methods run on the connection's
// own goroutine, so it needs no locks. Other goroutines touch only:
//   - pub, whose fields are atomic: answered, admitted, thread, onReplicaNow,
//     current, idle, txnOpen, idleEpoch, watched;
//   - under Server.mu, the ones fixed before it is listed (id, host, conn,
//     log) or at login (user): eviction, KILL and shutdown read them and
//     close conn.
type session struct {
	srv    *Server
	id     uint32
	status uint16 // server status after the last response the client saw
	tls    bool
	// resetOnClose: the primary connection went away, and the client's
	// is reset when the session ends, as MariaDB resets it (see gone.go).
	// (The four small fields share one word: the struct stays within
	// a smaller allocation size class.)
	resetOnClose bool
	conn         net.Conn
	cr           *packetReader
	cw           *packetWriter
	log          *zap.Logger
	// mem is the session's memory budget (see memory.go).
	mem *sessionMem
	// host is the client's address without the port.
	host string
	// idleAt is the read deadline the idle timeout keeps set on conn,
	// in Unix nanoseconds; 0: none (idledeadline.go).
	idleAt int64
	// pub is what other goroutines read of the session, all atomic (gone.go).
	pub published

	// client is what the client negotiated (login.go).
	client clientSettings
	user   string

	be *backendConn // the pinned primary connection
	// passed is the primary connection a relayed login opened
	// (passLogin), until pinBackend makes it be.
	passed *backendConn
	// ex is the command being served: how its response is relayed and
	// what its end does (exchange.go).
	ex exchange
	// prep is the prepared statements (stmt.go).
	prep stmtTable

	errsWritten uint64 // ERR packets lockproxy wrote itself
	// txn is the locks of the transaction or autocommit statement (guard.go).
	txn txnLocks

	// route is replica choice and read-your-writes (routing.go).
	route routeState

	// obs is observe mode's notes (observe.go).
	obs     observeState
	hardCtx context.Context // ends when the shutdown grace is over: lockproxy stops for good

	// rwr is the rewriter's beliefs (rewrite.go).
	rwr rewriterState

	// reading is how the session's server reads its text: sql_mode,
	// character sets, the current database (sqlmode.go).
	reading modeState

	// ddl is the schema read after the session's last DDL (schema_ddl.go).
	ddl ddlRead

	// priv is the PROCESS privilege as the backend last said (privilege.go).
	priv privCache

	// comb is what hot-row combining keeps of the session (combine.go).
	comb combineState
	// mux is what multiplexing keeps of the session (pool_mux.go).
	mux muxState
}

// writeErrAt answers e as the error packet with sequence seq (counted
// from the command's last packet, see cmdSeq) and flushes; toSQLError
// decides the code, SQLSTATE and message the client reads.
func (s *session) writeErrAt(seq byte, e error) error {
	s.errsWritten++
	seq += s.ex.cmdSeq
	if _, err := s.cw.writePacket(seq, errPayload(toSQLError(e))); err != nil {
		return err
	}
	return s.cw.flush()
}

// open runs the connection phase and reports whether the session is
// logged in; when not, the session is already cleaned up. Panics are
// contained to this session.
func (s *session) open(drain context.Context) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session panic", zap.Any("panic", r), zap.Stack("stack"))
			ok = false
		}
		if !ok {
			s.cleanup()
		}
	}()
	if err := s.handshake(drain); err != nil {
		s.log.Debug("handshake failed", zap.Error(err))
		return false
	}
	s.log.Debug("session open", zap.String("user", s.user), zap.String("db", s.reading.db))
	return true
}

// serveCommands serves a logged-in connection until the client quits, the
// connection breaks or drain is cancelled by shutdown (then it ends
// outside a transaction), and cleans up. Panics are contained to this
// session.
func (s *session) serveCommands(drain context.Context) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session panic", zap.Any("panic", r), zap.Stack("stack"))
		}
		s.cleanup()
	}()
	if err := s.commandLoop(drain); err != nil && !isClosedConn(err) {
		s.log.Debug("session ended", zap.Error(err))
	}
}

// cleanup returns the backend connection and closes the client socket.
func (s *session) cleanup() {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session cleanup panic", zap.Any("panic", r), zap.Stack("stack"))
			_ = s.conn.Close()
		}
	}()
	s.pub.watched.Store(nil)
	s.txn.await()
	s.mux.end(s.srv.pool.bounds.m.pinned)
	if s.be != nil {
		// The pool's reset rolls back any open transaction before the
		// locks go: release only after the backend has forgotten it.
		s.srv.pool.putSync(s.be)
		s.releaseLocks()
		s.be = nil
	}
	s.releaseLocks()
	if s.obs.watchEnd != nil {
		<-s.obs.watchEnd // the notes are gone before the session is: bounded by releaseTimeout
	}
	s.route.dropReplica(s.srv.pool)
	clear(s.client.stage1)
	if s.resetOnClose {
		resetClose(s.conn)
	}
	_ = s.conn.Close()
	// Whatever the session still had charged (packet buffer, long data,
	// plans) goes back to the process's budget.
	if s.mem != nil {
		s.mem.give(s.mem.used)
	}
}

// handshake runs the connection phase: greeting, optional TLS,
// authentication, and the backend connection that the session pins.
func (s *session) handshake(ctx context.Context) error {
	cfg := s.srv.config()
	_ = s.conn.SetDeadline(time.Now().Add(cfg.Proxy.HandshakeTimeout.D()))
	defer func() { _ = s.conn.SetDeadline(time.Time{}) }()

	salt, err := newSalt()
	if err != nil {
		return err
	}
	s.client.salt = salt
	caps := uint32(serverCaps)
	clientTLS := s.srv.loaded().clientTLS
	if clientTLS != nil {
		caps |= mysql.CLIENT_SSL
	}
	plugin := s.srv.authPlugin
	ext := s.srv.offeredExtCaps()
	if _, err := s.cw.writePacket(0, initialHandshake(s.srv.serverVersion(), s.id, salt, caps, ext, plugin)); err != nil {
		return err
	}
	if err := s.cw.flush(); err != nil {
		return err
	}
	seq, p, err := s.cr.readLogical(4096)
	if err != nil {
		return err
	}
	// MariaDB reads the extended capabilities from the client's first
	// answer: the SSLRequest when there is one.
	clientExt, upgraded := extCapsAt(p), false
	if isSSLRequest(p) {
		upgraded = true
		if err := s.upgradeTLS(clientTLS); err != nil {
			return err
		}
		if seq, p, err = s.cr.readLogical(4096); err != nil {
			return err
		}
	} else if s.srv.requireTLS() {
		return s.writeErrAt(seq+1, errorf(errAccessDenied, "connections must use TLS"))
	}
	s.pub.answered.Store(true)
	resp, err := parseHandshakeResponse(p)
	if err != nil {
		_ = s.writeErrAt(seq+1, errorf(errHandshake, "bad handshake"))
		return err
	}
	s.client.caps, s.client.collation, s.user, s.reading.db = resp.caps&(caps|mysql.CLIENT_SSL), resp.collation, resp.user, resp.db
	if !upgraded {
		clientExt = resp.ext
	}
	s.client.ext = clientExt & ext
	s.client.attrs = resp.attrs
	seq, err = s.authenticate(seq+1, resp.plugin, resp.auth, plugin, s.reading.db, s.client.collation)
	if err != nil {
		return err
	}
	if e := s.srv.loggedIn(s); e != nil {
		if s.passed != nil {
			s.srv.pool.put(s.passed) // closed: no one else may use its login
			s.passed = nil
		}
		_ = s.writeErrAt(seq, e)
		return e
	}
	if err := s.pinBackend(ctx, seq); err != nil {
		return err
	}
	if s.client.caps&mysql.CLIENT_COMPRESS != 0 {
		// The compressed protocol starts after the login's OK was flushed.
		cc := newCompressConn(s.conn)
		s.srv.setConn(s, cc)
		s.cr, s.cw = newPacketReader(cc, clientBufSize), newPacketWriter(cc, clientBufSize)
		s.cr.mem = s.mem
	}
	return nil
}

// pinBackend takes a primary connection for the session's user, database
// and capabilities, and answers the login (or COM_CHANGE_USER) with OK —
// or with the backend's error (unknown database, access denied) when the
// connection cannot be opened.
func (s *session) pinBackend(ctx context.Context, seq byte) error {
	be, err := s.passed, error(nil)
	s.passed = nil
	if be == nil {
		be, err = s.srv.pool.get(ctx, s.client.backendKey(s.srv, s.user, s.reading.db))
	}
	if err != nil {
		if se, ok := err.(*sqlError); ok && s.client.relayed && se.State == "28000" {
			// MariaDB refused an account lockproxy let in: what lockproxy
			// read of it is stale.
			go s.srv.rereadAccounts()
		}
		s.srv.metrics.backendErrors.WithLabelValues("primary").Inc()
		_ = s.writeErrAt(seq, backendDialError(err))
		return err
	}
	s.be = be
	s.srv.noteBackendExtCaps(be.offeredExt) // the primary may have been away at start
	s.pub.watched.Store(be)
	s.reading.stale = true // read before the first analysis on this connection
	s.pub.thread.Store(be.threadID)
	s.status = be.status
	if _, err := s.cw.writePacket(seq, okPayload(0, 0, s.status, 0)); err != nil {
		return err
	}
	if err := s.cw.flush(); err != nil {
		return err
	}
	s.startMultiplex()
	return nil
}

// backendKey names the primary connections a client of these settings
// logged in as user with database db uses: the pool's key.
func (c *clientSettings) backendKey(srv *Server, user, db string) poolKey {
	cfg := srv.config()
	k := poolKey{
		addr:      cfg.Backends.Primary,
		user:      user,
		password:  c.password,
		db:        db,
		caps:      c.caps & mirroredCaps,
		ext:       c.ext,
		collation: c.collation,
		tls:       srv.loaded().backendTLS,
		attrs:     c.attrs,
		track:     true,
	}
	if c.relayed {
		k.relay = relayedLogin{on: true, passed: c.passed, stage1: string(c.stage1), viaUser: cfg.Users[0].User, viaPassword: cfg.Users[0].Password}
	}
	if c.passed {
		k.password = ""
	}
	return k
}

// backendDialError turns a failure to open a backend connection into the
// error the client gets: the backend's own when it sent one (unknown
// database, access denied), else errPrimaryUnreachable naming the cause.
func backendDialError(err error) error {
	_, backends := asIs(err)
	if _, mapped := clientErrorOf(err); backends || mapped {
		return err
	}
	return errorf(errPrimaryUnreachable, "cannot connect to the primary: %w", err)
}

func isClosedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// String names the session in logs: its connection id and user.
func (s *session) String() string { return fmt.Sprintf("session %d (%s)", s.id, s.user) }
