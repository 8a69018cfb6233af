package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"go.uber.org/zap"
)

// session is one client connection. All its methods run on the connection's
// own goroutine, so it needs no locks. Other goroutines touch only:
//   - its atomic fields: answered, thread, onReplicaNow, current, idle,
//     txnOpen, idleEpoch, watched;
//   - under Server.mu, the ones fixed before it is listed (id, host, conn,
//     log) or at login (user): eviction, KILL and shutdown read them and
//     close conn.
type session struct {
	srv  *Server
	id   uint32
	conn net.Conn
	cr   *packetReader
	cw   *packetWriter
	log  *zap.Logger
	tls  bool
	// mem is the session's memory budget (see memory.go).
	mem *sessionMem
	// rowCharge is what a large row held for a capture takes of mem until
	// the command ends (passRow, shrinkBuffers).
	rowCharge int64
	// host is the client's address without the port; answered is set once
	// the client has sent a whole handshake response (see
	// Server.evictHandshakeLocked).
	host     string
	answered atomic.Bool

	salt []byte
	caps uint32 // capabilities the client negotiated
	// ext are the MariaDB extended capabilities the client negotiated
	// (mariadbcaps.go), which its backend connections negotiate too.
	ext       uint32
	collation uint8
	user      string
	attrs     connAttrs // the client's connection attributes
	password  string
	db        string
	// relayed: the user's account was read from the primary
	// (users.from_backend), and stage1 = SHA1(password) is what its
	// backend connections log in with (relaylogin.go); never logged.
	relayed bool
	stage1  []byte

	be *backendConn // the pinned primary connection
	// ex is the command being served: how its response is relayed and
	// what its end does (exchange.go).
	ex     exchange
	stmts  map[uint32]*stmt
	nextID uint32
	// lastPrepared is the id of the statement the last prepare made, 0
	// when it failed or that statement was closed: what MariaDB's direct
	// execute (statement id 0xFFFFFFFF) names.
	lastPrepared uint32
	status       uint16 // server status after the last response the client saw

	errsWritten uint64 // ERR packets lockproxy wrote itself
	// releasing, when not nil, is the release of the last transaction's
	// locks, given back in the background (releaseBehind); awayBefore is
	// the lock service's failure to answer such a release, which the next
	// lock wait names if it times out.
	releasing  *release
	awayBefore error

	// Routing: the replica connection, SETs to replay on it, and what
	// read-your-writes needs.
	replica       replicaState
	sets          []string
	lastGTID      string
	needGTID      bool
	pinnedPrimary bool
	// nextTxnPrimary: SET TRANSACTION without a scope set the next
	// transaction's characteristics, on the primary's connection.
	nextTxnPrimary bool
	// diagReplica: the session's diagnostics area (SHOW WARNINGS) is
	// its replica connection's, which served the last statement;
	// diagPrev is what diagReplica was before the command being served
	// (beginCommand).
	diagReplica, diagPrev bool

	// Locks held for the current transaction or autocommit statement.
	locks  *lockmgr.Set
	txnSeq uint64
	// watch is what the session noted in the lock service for the keys
	// rules in observe mode would have locked in the current transaction
	// (observe.go); nil until one does. watchSeq numbers such
	// transactions.
	watch    *watching
	watchSeq uint64
	watchEnd chan struct{}   // closed when the last notes given back are gone
	hardCtx  context.Context // ends when the shutdown grace is over: lockproxy stops for good

	// Rewriting: what the session believes rows hold, and whether its
	// escaping forbids rewriting (the command's capture and guarded
	// UPDATE are in ex).
	beliefs map[string]belief
	// dyn is what the session's SQL-level PREPARE and SET @v made known.
	dyn           dynState
	lastAffected  uint64
	unsafeCharset bool
	// multiOption is the client's last COM_SET_OPTION that succeeded:
	// 0 none, 1 multi-statements on, 2 off (session.multiStatements).
	multiOption uint8

	// sqlMode is the session's sql_mode as the parser needs it.
	sqlMode modeState

	// schemaRead is closed when the schema re-read after this session's
	// last DDL has been stored (nil: none pending); the session's next
	// plan waits for it (see refreshSchemaAsync).
	schemaRead chan struct{}

	// thread is the backend thread id of the pinned primary connection,
	// for KILL from other sessions.
	thread atomic.Uint32
	// onReplicaNow is the replica connection a command of the session is
	// running on now (nil: none), so KILL reaches that query.
	onReplicaNow atomic.Pointer[replicaRun]

	// What the backend said of the user's PROCESS privilege, for SHOW
	// LOCKPROXY LOCKS (privUser: the user it was asked for).
	privUser               string
	privKnown, privProcess bool

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
	// resetOnClose: the primary connection went away, and the client's
	// is reset when the session ends, as MariaDB resets it (see gone.go).
	resetOnClose bool

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
	s.log.Debug("session open", zap.String("user", s.user), zap.String("db", s.db))
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
	s.watched.Store(nil)
	s.awaitRelease()
	s.endMultiplex()
	if s.be != nil {
		// The pool's reset rolls back any open transaction before the
		// locks go: release only after the backend has forgotten it.
		s.srv.pool.putSync(s.be)
		s.releaseLocks()
		s.be = nil
	}
	s.releaseLocks()
	if s.watchEnd != nil {
		<-s.watchEnd // the notes are gone before the session is: bounded by releaseTimeout
	}
	s.dropReplica()
	clear(s.stage1)
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
	s.salt = salt
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
	s.answered.Store(true)
	resp, err := parseHandshakeResponse(p)
	if err != nil {
		_ = s.writeErrAt(seq+1, errorf(errHandshake, "bad handshake"))
		return err
	}
	s.caps, s.collation, s.user, s.db = resp.caps&(caps|mysql.CLIENT_SSL), resp.collation, resp.user, resp.db
	if !upgraded {
		clientExt = resp.ext
	}
	s.ext = clientExt & ext
	s.attrs = resp.attrs
	seq, err = s.authenticate(seq+1, resp.plugin, resp.auth, plugin)
	if err != nil {
		return err
	}
	if e := s.srv.loggedIn(s); e != nil {
		_ = s.writeErrAt(seq, e)
		return e
	}
	if err := s.pinBackend(ctx, seq); err != nil {
		return err
	}
	if s.caps&mysql.CLIENT_COMPRESS != 0 {
		s.startCompression()
	}
	return nil
}

// pinBackend takes a primary connection for the session's user, database
// and capabilities, and answers the login (or COM_CHANGE_USER) with OK —
// or with the backend's error (unknown database, access denied) when the
// connection cannot be opened.
func (s *session) pinBackend(ctx context.Context, seq byte) error {
	be, err := s.srv.pool.get(ctx, s.backendKey())
	if err != nil {
		if se, ok := err.(*sqlError); ok && s.relayed && se.State == "28000" {
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
	s.watched.Store(be)
	s.modeMayHaveChanged() // read before the first analysis on this connection
	s.thread.Store(be.threadID)
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

func (s *session) backendKey() poolKey {
	cfg := s.srv.config()
	k := poolKey{
		addr:      cfg.Backends.Primary,
		user:      s.user,
		password:  s.password,
		db:        s.db,
		caps:      s.caps & mirroredCaps,
		ext:       s.ext,
		collation: s.collation,
		tls:       s.srv.loaded().backendTLS,
		attrs:     s.attrs,
		track:     true,
	}
	if s.relayed {
		k.relay = relayedLogin{on: true, stage1: string(s.stage1), viaUser: cfg.Users[0].User, viaPassword: cfg.Users[0].Password}
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
