package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/pingcap/tidb/pkg/parser/charset"
)

const (
	backendBufSize = 32 << 10
	clientBufSize  = 16 << 10
	// idleCheckAfter is how long a pooled connection may sit before it is
	// pinged on checkout.
	idleCheckAfter = 30 * time.Second
	dialTimeout    = 5 * time.Second
)

// poolKey names the backend connections that are interchangeable: same
// server, same credentials, same default database, same mirrored
// capabilities and handshake collation.
type poolKey struct {
	addr     string
	user     string
	password string
	db       string
	caps     uint32
	// ext are MariaDB's extended capabilities the client negotiated
	// (mariadbcaps.go): the connection negotiates them too.
	ext       uint32
	collation uint8
	// tls, when not nil, is the TLS configuration to the backend
	// (backends.tls); a reload that changes it gives new keys.
	tls *tls.Config
	// readOnly: a replica connection, whose session is made read-only
	// (readOnlySession) when it is opened and after every reset, so that
	// MariaDB itself refuses any write a read lockproxy sent there makes.
	readOnly bool
	// attrs are the client's connection attributes the connection was
	// opened with (connattrs.go).
	attrs connAttrs
	// track: a primary connection, which negotiates CLIENT_SESSION_TRACK
	// whatever the client did and runs trackSession when it is opened
	// and after every reset (sessiontrack.go).
	track bool
	// relay, when on, logs the connection in as an account read from
	// the primary (relaylogin.go); user is that account, password unused.
	relay relayedLogin
}

// backendConn is one authenticated connection to a MySQL server, used raw
// after the handshake. It is owned by one session at a time.
type backendConn struct {
	key      poolKey
	nc       net.Conn
	raw      syscall.RawConn // the TCP socket under nc, for peekReadable
	r        *packetReader
	w        *packetWriter
	status   uint16 // server status after the last complete response
	version  string
	threadID uint32
	// offeredExt are the extended capabilities the server's greeting
	// offered.
	offeredExt uint32
	dbDirty    bool // the session may have changed the current database
	// optionSet: a session sent COM_SET_OPTION, which COM_RESET_CONNECTION
	// does not undo, so the connection no longer matches its key.
	optionSet bool
	idleAt    time.Time
	broken    bool
	// counted is the pool that counts the connection among its
	// backend's open connections (pool_limit.go); close frees its slot.
	counted *pool
	// clientTrack is what a primary connection's session tracks for its
	// client (sessiontrack.go).
	clientTrack clientTracking
	// scramble is the last the server gave the connection to answer, for
	// a relayed login (relaylogin.go); kept only for relay keys.
	scramble []byte
	// pre, when set, is a statement owed to the session before its next
	// one (ROW_COUNT() after a combined statement: combine_answer.go):
	// writeCommand sends it in the same flight as the next command and
	// drops its answer. A command that resets the session drops it.
	pre []byte
	// stmts are the statements prepared on the connection that the
	// multiplexing sessions it is lent to share (pool_stmt.go).
	stmts map[connStmtKey]connStmt
	// waitTimeout is the session's wait_timeout when the connection was
	// set up or its tracking read again (startTracking).
	waitTimeout time.Duration
	// sandbox: the session's account logged in with an expired password
	// and MariaDB runs only SET until it is changed (startTracking). Such a
	// connection stays with its session and is never pooled.
	sandbox bool
}

// dialBackend connects and authenticates with go-mysql's client, then keeps
// only the socket: from here on packets are relayed, not interpreted.
func dialBackend(ctx context.Context, key poolKey) (*backendConn, error) {
	return dialBackendWith(ctx, key, nil)
}

// dialBackendWith is dialBackend whose relayed login the client answers
// through converse (a passed login: relayLogin).
func dialBackendWith(ctx context.Context, key poolKey, converse func([]byte) ([]byte, error)) (*backendConn, error) {
	collation := "utf8mb4_general_ci"
	if c, err := charset.GetCollationByID(int(key.collation)); err == nil && c.ID < 256 {
		collation = c.Name
	}
	user, password := key.user, key.password
	var tap *greetingTap
	if key.relay.on {
		user, password = key.relay.viaUser, key.relay.viaPassword
	}
	opt := func(c *client.Conn) error {
		// go-mysql's connection is used for the login only (the socket is
		// lockproxy's after it): its default 64 KiB read buffer would be
		// garbage at once, a cost of every backend connection made.
		c.BufferSize = loginBufSize
		for _, f := range []uint32{mysql.CLIENT_FOUND_ROWS, mysql.CLIENT_IGNORE_SPACE, mysql.CLIENT_MULTI_STATEMENTS,
			mysql.CLIENT_MULTI_RESULTS, mysql.CLIENT_PS_MULTI_RESULTS, mysql.CLIENT_LOCAL_FILES, mysql.CLIENT_SESSION_TRACK} {
			if key.caps&f != 0 || f == mysql.CLIENT_SESSION_TRACK && key.track {
				if err := c.SetCapability(f); err != nil {
					return err
				}
			} else {
				c.UnsetCapability(f)
			}
		}
		if key.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
			c.UnsetCapability(mysql.CLIENT_DEPRECATE_EOF)
		}
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		if key.ext != 0 {
			c.UnsetCapability(clientMySQL) // or MariaDB ignores key.ext
		}
		c.SetAttributes(key.attrs.backend())
		if key.tls != nil {
			c.SetTLSConfig(rules.ForAddr(key.tls, key.addr))
		}
		return c.SetCollation(collation)
	}
	var raw syscall.RawConn
	var tcp net.Conn
	var ec *extCapsConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{Timeout: dialTimeout, KeepAlive: time.Minute}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if sc, ok := nc.(syscall.Conn); ok {
			raw, _ = sc.SyscallConn()
		}
		// The greeting, TLS and authentication get the dial's time too:
		// a server that accepts and says nothing must not hang a login.
		_ = nc.SetDeadline(time.Now().Add(dialTimeout))
		tcp = nc
		ec = &extCapsConn{Conn: nc, want: key.ext, caps: key.caps & mysql.CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS}
		if key.relay.on {
			tap = &greetingTap{Conn: ec}
			return tap, nil
		}
		return ec, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	cc, err := client.ConnectWithDialer(ctx, "tcp", key.addr, user, password, key.db, dial, opt)
	if err != nil {
		if tcp != nil {
			_ = tcp.Close()
		}
		return nil, err
	}
	_ = tcp.SetDeadline(time.Time{})
	nc := cc.Conn.Conn
	if nc == net.Conn(ec) || tap != nil && nc == net.Conn(tap) {
		nc = tcp // past the login: the socket itself (TLS keeps the layer)
	}
	if err := checkExtCaps(key.ext, ec.serverExt()); err != nil {
		_ = nc.Close()
		return nil, err
	}
	status := uint16(0)
	if cc.IsAutoCommit() {
		status |= mysql.SERVER_STATUS_AUTOCOMMIT
	}
	sio := rawsock.New(nc)
	b := &backendConn{
		key:      key,
		nc:       nc,
		raw:      raw,
		r:        newPacketReader(sio, backendBufSize),
		w:        newPacketWriter(sio, 4<<10),
		status:   status,
		version:  cc.GetServerVersion(),
		threadID: cc.GetConnectionID(),

		offeredExt: ec.serverExt(),
	}
	if key.relay.on {
		b.scramble = tap.scramble
		_ = tcp.SetDeadline(time.Now().Add(dialTimeout))
		err = b.relayLogin(converse)
		_ = tcp.SetDeadline(time.Time{})
	}
	if err == nil {
		err = b.initSession()
	}
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// loginBufSize is the read buffer of go-mysql's connection during a
// backend login: greeting, authentication and its answers.
const loginBufSize = 4 << 10

// initSession gives a connection just logged in (or reset) what its key
// asks of the session beyond the login: interactive_timeout, read-only
// transactions, session state tracking.
func (b *backendConn) initSession() error {
	if b.key.caps&mysql.CLIENT_INTERACTIVE != 0 {
		// go-mysql cannot announce CLIENT_INTERACTIVE: give the session
		// what MariaDB gives an interactive login.
		if err := b.simpleCommand(append([]byte{mysql.COM_QUERY}, restoreInteractive...)); err != nil {
			return fmt.Errorf("proxy: giving an interactive client's session interactive_timeout: %w", err)
		}
	}
	if b.key.readOnly {
		if err := b.simpleCommand(append([]byte{mysql.COM_QUERY}, readOnlySession...)); err != nil {
			return fmt.Errorf("proxy: making a replica session read-only: %w", err)
		}
	}
	if b.key.track {
		if err := b.startTracking(true); err != nil {
			return fmt.Errorf("proxy: turning on session state tracking: %w", err)
		}
	}
	return nil
}

// readOnlySession makes a replica connection's transactions read-only: a
// write there (a stored function a read calls, NEXTVAL) fails with 1792
// instead of landing on the replica, whatever the account's privileges
// (READ_ONLY ADMIN and SUPER pass the server's read_only, not this).
const readOnlySession = "SET SESSION TRANSACTION READ ONLY"

// writeCommand sends a command packet (sequence 0) and flushes it.
func (b *backendConn) writeCommand(payload []byte) error {
	pre := b.pre
	b.pre = nil
	switch payload[0] {
	case mysql.COM_RESET_CONNECTION, mysql.COM_CHANGE_USER, mysql.COM_QUIT:
		pre = nil
		b.stmts = nil // the server drops them
	}
	if pre != nil {
		if _, err := b.w.writePacket(0, pre); err != nil {
			b.broken = true
			return err
		}
	}
	if _, err := b.w.writePacket(0, payload); err != nil {
		b.broken = true
		return err
	}
	if err := b.w.flush(); err != nil {
		b.broken = true
		return err
	}
	if pre != nil {
		// Its answer comes first; the command's is on its way behind it.
		_, p, err := b.r.readPhysical()
		if err != nil {
			b.broken = true
			return err
		}
		if len(p) == 0 || p[0] != mysql.OK_HEADER && p[0] != mysql.ERR_HEADER {
			b.broken = true
			return fmt.Errorf("proxy: unexpected reply %x to a statement sent before a command", p)
		}
	}
	return nil
}

// simpleCommand sends a command whose answer is one OK or ERR packet and
// returns the backend's error, if any.
func (b *backendConn) simpleCommand(payload []byte) error {
	if err := b.writeCommand(payload); err != nil {
		return err
	}
	_, p, err := b.r.readPhysical()
	if err != nil {
		b.broken = true
		return err
	}
	switch {
	case len(p) > 0 && p[0] == mysql.ERR_HEADER:
		return parseErrPayload(p)
	case len(p) > 0 && p[0] == mysql.OK_HEADER:
		if st, ok := okStatus(p); ok {
			b.status = st
		}
		return nil
	default:
		b.broken = true
		return fmt.Errorf("proxy: unexpected reply 0x%x from backend", p[0])
	}
}

func (b *backendConn) close() {
	_ = b.nc.Close()
	if p := b.counted; p != nil {
		b.counted = nil
		p.free(b.key)
	}
}

// pool keeps idle backend connections by key. It is safe for concurrent use.
type pool struct {
	mu     sync.Mutex
	idle   map[poolKey][]*backendConn
	closed bool
	wg     sync.WaitGroup
	// Connections counted per backend address, and the sessions waiting
	// for one (pool_limit.go).
	bounds poolBounds
}

func newPool() *pool {
	return &pool{idle: make(map[poolKey][]*backendConn), bounds: newPoolBounds()}
}

// get returns an idle connection for key, or dials a new one, for a
// login: an account read from the primary logs in again on an idle
// connection, so MariaDB judges the login.
func (p *pool) get(ctx context.Context, key poolKey) (*backendConn, error) {
	return p.take(ctx, key, false, 0)
}

// lend is get for a session whose login MariaDB judged already (a
// multiplexing session borrowing again): an idle connection of its key
// is logged in as its account with its password, and is lent as it is.
// limit, when positive, bounds the wait for room and the dial when no
// idle connection is left (an idle one is lent without a timer).
func (p *pool) lend(ctx context.Context, key poolKey, limit time.Duration) (*backendConn, error) {
	return p.take(ctx, key, true, limit)
}

// take is get (judged false) or lend (judged true); limit, when
// positive, bounds only the wait for room and the dial.
func (p *pool) take(ctx context.Context, key poolKey, judged bool, limit time.Duration) (*backendConn, error) {
	for {
		p.mu.Lock()
		list := p.idle[key]
		if len(list) == 0 {
			p.mu.Unlock()
			if limit > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, limit)
				defer cancel()
			}
			return p.dial(ctx, key, judged)
		}
		b := list[len(list)-1]
		p.idle[key] = list[:len(list)-1]
		p.mu.Unlock()
		if b.expired(p.bounds.settings().IdleTimeout.D()) || b.peekReadable() {
			b.close() // closed by the server while idle (wait_timeout, KILL)
			continue
		}
		if key.relay.on && !judged {
			// An account read from the primary: MariaDB judges every
			// login, so the connection logs in again for this one.
			err := b.relogin()
			if err == nil {
				return b, nil
			}
			b.close()
			if isMySQLErr(err) {
				return nil, err
			}
			continue
		}
		if time.Since(b.idleAt) < idleCheckAfter {
			return b, nil
		}
		if err := b.simpleCommand([]byte{mysql.COM_PING}); err == nil {
			return b, nil
		}
		b.close()
	}
}

// relogin logs an idle connection of a relayed login in again and sets
// its session up as a new connection's.
func (b *backendConn) relogin() error {
	_ = b.nc.SetDeadline(time.Now().Add(dialTimeout))
	defer func() { _ = b.nc.SetDeadline(time.Time{}) }()
	if err := b.relayLogin(nil); err != nil {
		return err
	}
	return b.initSession()
}

// put resets b in the background and keeps it for reuse; a connection that
// cannot be reset to a clean state is closed instead.
func (p *pool) put(b *backendConn) {
	if b == nil {
		return
	}
	if b.broken {
		b.close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.putSync(b)
	}()
}

// putSync resets b and keeps it, returning after the reset: the session
// ends only once the backend has rolled back what it left open.
func (p *pool) putSync(b *backendConn) {
	if b.broken || !p.reset(b) {
		b.close()
		return
	}
	p.keep(b)
}

// keep makes b, clean, idle: handed to a session waiting for a connection
// to its backend when there is one (pool_limit.go), else kept for reuse.
func (p *pool) keep(b *backendConn) {
	if b.sandbox || b.key.relay.passed {
		b.close() // its session's alone, rolled back by the reset
		return
	}
	b.r.shrink() // an idle connection holds no buffer
	p.mu.Lock()
	if p.handLocked(b) {
		p.mu.Unlock()
		return
	}
	if p.closed || len(p.idle[b.key]) >= p.bounds.settings().MaxIdle {
		p.mu.Unlock()
		b.close()
		return
	}
	b.idleAt = time.Now()
	p.idle[b.key] = append(p.idle[b.key], b)
	p.mu.Unlock()
}

// restoreIgnoreSpace puts back what CLIENT_IGNORE_SPACE sets at login.
const restoreIgnoreSpace = "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@session.sql_mode, ''), 'IGNORE_SPACE')"

// restoreInteractive gives a reset connection of an interactive client
// (CLIENT_INTERACTIVE) the wait_timeout MariaDB gives one at login.
const restoreInteractive = "SET SESSION wait_timeout = @@global.interactive_timeout"

// reset returns b to the state of a fresh connection for its key.
func (p *pool) reset(b *backendConn) bool {
	if b.optionSet {
		return false
	}
	_ = b.nc.SetDeadline(time.Now().Add(dialTimeout))
	defer func() { _ = b.nc.SetDeadline(time.Time{}) }()
	if err := b.simpleCommand([]byte{mysql.COM_RESET_CONNECTION}); err != nil {
		return false
	}
	if b.key.caps&mysql.CLIENT_IGNORE_SPACE != 0 {
		// The reset took sql_mode back to the global value, dropping the
		// IGNORE_SPACE that the capability added at login.
		if err := b.simpleCommand(append([]byte{mysql.COM_QUERY}, restoreIgnoreSpace...)); err != nil {
			return false
		}
	}
	// The reset took wait_timeout back to the global value (an
	// interactive client's login has interactive_timeout there), and
	// the session's read-only transactions and tracking with it.
	if err := b.initSession(); err != nil {
		return false
	}
	if b.dbDirty {
		if b.key.db == "" {
			return false
		}
		if err := b.simpleCommand(append([]byte{mysql.COM_INIT_DB}, b.key.db...)); err != nil {
			return false
		}
		b.dbDirty = false
	}
	return b.status&mysql.SERVER_STATUS_IN_TRANS == 0
}

// close closes every idle connection and waits for resets in flight.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var all []*backendConn
	for k, list := range p.idle {
		all = append(all, list...)
		delete(p.idle, k)
	}
	p.failWaitersLocked()
	p.mu.Unlock()
	for _, b := range all {
		b.close() // outside mu: close frees the connection's slot under it
	}
	p.wg.Wait()
}
