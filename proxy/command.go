package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// commandLoop reads one command at a time and serves it. It returns when the
// client quits or the connection fails, or, once drain is cancelled (the
// proxy is shutting down), when the session is outside a transaction.
func (s *session) commandLoop(drain context.Context) error {
	limit := int(s.srv.config().Proxy.MaxAllowedPacket)
	for {
		inTxn := s.status&mysql.SERVER_STATUS_IN_TRANS != 0
		s.pub.txnOpen.Store(inTxn)
		if inTxn && drain.Err() != nil {
			_ = s.conn.SetReadDeadline(time.Time{})
			s.forgetIdleDeadline()
		}
		s.pub.idle.Store(true)
		s.pub.idleEpoch.Add(1)
		idle := s.srv.config().Proxy.IdleTimeout.D()
		if w := s.mux.idleLimit(s.be); w > 0 && (idle == 0 || w < idle) {
			idle = w
		}
		// The idle timeout's deadline stays set across commands
		// (idledeadline.go). Once draining, the deadline of a session
		// outside a transaction is shutdown's (closeIdleSessions).
		var since time.Time
		if drain.Err() == nil {
			if idle > 0 {
				since = time.Now()
				s.keepIdleDeadline(since.Add(idle), idle)
			} else {
				s.clearIdleDeadline()
			}
		}
		// Waiting holds no buffer: an idle session costs little more than
		// its goroutine.
		var p []byte
		var seq uint8
		err := s.cr.waitIdle()
		for idleFiredEarly(err, since, idle) && (drain.Err() == nil || inTxn) {
			s.setIdleDeadline(since.Add(idle)) // set for an earlier wait
			err = s.cr.waitIdle()
		}
		if err == nil {
			if !since.IsZero() && s.idleAt != since.Add(idle).UnixNano() && !s.cr.holdsPacket() {
				// The packet is not all here: its reads may wait, and
				// a deadline set for an earlier wait must not end them
				// early.
				s.setIdleDeadline(since.Add(idle))
			}
			seq, p, err = s.cr.readLogical(limit)
		}
		s.ex.cmdSeq = seq
		s.pub.idleEpoch.Add(1)
		s.pub.idle.Store(false)
		if errors.Is(err, errOutOfMemory) {
			// The packet was read past: refuse it, keep the session.
			s.srv.metrics.memoryRefused.Inc()
			if werr := s.writeErrAt(1, err); werr != nil {
				return werr
			}
			continue
		}
		if err != nil {
			if err == errPacketTooLarge {
				s.refuseOversized(err)
			}
			return err
		}
		if len(p) == 0 {
			return s.writeErrAt(1, errorf(errBadCommand, "empty command packet"))
		}
		if drain.Err() != nil && s.status&mysql.SERVER_STATUS_IN_TRANS == 0 {
			// Draining: outside a transaction the session ends here.
			return s.writeErrAt(1, errorf(errShutdown, "server shutdown in progress"))
		}
		s.route.beginCommand(p[0])
		s.ex.trackText = s.prep.namesTracking(p)
		err = s.dispatchLent(p)
		s.shrinkBuffers()
		if err != nil {
			return err
		}
		if s.ex.trackText || s.ex.trackChanged {
			if err := s.retrack(); err != nil {
				return err
			}
		}
	}
}

// oversizeDrain bounds how long, and how much, refuseOversized reads of
// the packet it refused.
const (
	oversizeDrainTime  = 2 * time.Second
	oversizeDrainBytes = 64 << 20
)

// refuseOversized answers a command packet over max_allowed_packet; the
// session then ends. The client may still be writing the packet: closing
// with it unread would reset the connection, and a reset discards the
// answer before the client reads it. So the answer is followed by the end
// of lockproxy's side of the stream, and what the client still sends is
// read and dropped, for a bounded time and amount.
func (s *session) refuseOversized(e error) {
	if err := s.writeErrAt(1, e); err != nil {
		return
	}
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(oversizeDrainTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(s.conn, oversizeDrainBytes))
}

// dispatch serves one command packet. A returned error ends the session;
// errors meant for the client are written by the handlers themselves.
func (s *session) dispatch(p []byte) error {
	switch p[0] {
	case mysql.COM_QUIT:
		s.releaseLocks()
		return errQuit
	case mysql.COM_QUERY:
		return s.query(p)
	case mysql.COM_INIT_DB:
		s.be.dbDirty = true
		if err := s.forward(p, relayResults, false); err != nil {
			return err
		}
		s.route.endKeepingCommand(s.ex.lastOK)
		if s.ex.lastOK && s.ex.lastReport&reportedSchema == 0 {
			// The server's report named no database: it is read again
			// before the next analysis.
			s.reading.db = string(p[1:])
			s.reading.stale = true
		}
		s.ex.lastReport = 0
		return nil
	case mysql.COM_PROCESS_KILL: // a connection kill by id
		if len(p) < 5 {
			return s.writeErrAt(1, errorf(errBadCommand, "malformed COM_PROCESS_KILL"))
		}
		return s.kill(false, false, uint64(binary.LittleEndian.Uint32(p[1:])))
	case mysql.COM_PING, mysql.COM_STATISTICS, mysql.COM_DEBUG:
		return s.forward(p, relaySingle, false)
	case mysql.COM_REFRESH:
		// FLUSH by command (mariadb-admin refresh, mariadb-dump
		// --flush-logs): MariaDB checks RELOAD. Grants may change.
		s.priv.known = false
		return s.forward(p, relaySingle, false)
	case mysql.COM_SET_OPTION:
		s.be.optionSet = true // never pooled again: see backendConn.optionSet
		if err := s.forward(p, relaySingle, false); err != nil {
			return err
		}
		s.route.endKeepingCommand(s.ex.lastOK)
		if s.ex.lastOK && len(p) >= 3 {
			s.client.multiOption = 1 + p[1] // 0: MYSQL_OPTION_MULTI_STATEMENTS_ON, 1: OFF
		}
		return nil
	case mysql.COM_FIELD_LIST:
		err := s.forward(p, relayFieldList, false)
		s.route.endKeepingCommand(s.ex.lastOK)
		return err
	case mysql.COM_RESET_CONNECTION:
		return s.resetConnection(p)
	case mysql.COM_CHANGE_USER:
		return s.changeUser(p)
	case mysql.COM_STMT_PREPARE:
		return s.prepare(p)
	case mysql.COM_STMT_EXECUTE:
		return s.execute(p)
	case comStmtBulkExecute:
		return s.bulkExecute(p)
	case mysql.COM_STMT_FETCH:
		return s.stmtCommand(p, relayFetch)
	case mysql.COM_STMT_RESET:
		if st, ok := s.prep.lookup(p); ok {
			st.resetLongData(s.mem)
			st.execID, st.cursor = 0, false // no cursor to fetch from until the next execute
		}
		return s.stmtCommand(p, relaySingle)
	case mysql.COM_STMT_SEND_LONG_DATA:
		// Long data is remembered for key derivation as it passes.
		if st, ok := s.prep.lookup(p); ok {
			st.longSent = true
			st.keepLongData(s.mem, p)
		}
		return s.stmtCommand(p, relayNone)
	case mysql.COM_STMT_CLOSE:
		return s.closeStmt(p)
	default:
		return s.writeErrAt(1, errorf(errBadCommand, "command 0x%02x is not supported through the proxy", p[0]))
	}
}

// forward sends a command packet to the pinned primary connection and
// relays its response as kind describes.
func (s *session) forward(p []byte, kind relayKind, binary bool) error {
	if err := s.send(s.be, p, kind, binary); err != nil {
		return s.backendFailed(s.be, err)
	}
	return nil
}

// send writes a command to b and relays b's response to the client.
func (s *session) send(b *backendConn, p []byte, kind relayKind, binary bool) error {
	s.ex.src = b
	if err := b.writeCommand(p); err != nil {
		if kind != relayNone {
			s.cw.relayRefusal(b)
		}
		return err
	}
	if kind == relayNone {
		return nil
	}
	return s.relay(kind, binary)
}

// relayRefusal passes on the error packet of a backend that stopped
// reading a command and closed the connection before it was all sent:
// MariaDB answers a statement over its max_allowed_packet with 1153 and
// closes, and the client reads that answer, as directly, before its
// connection closes (see backendFailed).
func (w *packetWriter) relayRefusal(b *backendConn) {
	if err := b.nc.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return
	}
	seq, p, err := b.r.readPhysical()
	if err != nil || len(p) == 0 || p[0] != mysql.ERR_HEADER {
		return
	}
	if w.writePhysical(seq, p) == nil {
		_ = w.flush()
	}
}

// backendFailed handles a broken primary connection mid-command: the
// session ends and the client connection is closed (its transaction state
// is gone).
func (s *session) backendFailed(b *backendConn, err error) error {
	var ce clientIOError
	if errors.As(err, &ce) {
		b.broken = true // its response was not read to the end
		return err
	}
	b.broken = true
	s.srv.metrics.backendErrors.WithLabelValues("primary").Inc()
	// No ERR packet: 2013 is a client-side code, which client libraries
	// take for a malformed packet when a server sends it. The client sees
	// its connection close, as when MariaDB closes it (see gone.go).
	s.log.Info("lost the connection to the primary; closing the client's", zap.Error(err))
	s.resetOnClose = errors.Is(err, syscall.ECONNRESET)
	return err
}

// resetConnection forwards COM_RESET_CONNECTION and forgets the session's
// statements: the backend has dropped them.
func (s *session) resetConnection(p []byte) error {
	if err := s.forward(p, relaySingle, false); err != nil {
		return err
	}
	if s.ex.lastOK {
		s.prep.forgetAll(s.mem)
		clear(s.rwr.beliefs)
		s.rwr.dyn.reset()
		s.route.dropReplica(s.srv.pool)
		s.reading.stale = true
		if err := s.be.startTracking(true); err != nil {
			// Without tracking the session would depend on foreseeing
			// every change of its state: end it rather than go on.
			s.be.broken = true
			return s.backendFailed(s.be, fmt.Errorf("proxy: turning on session state tracking after a reset: %w", err))
		}
	}
	s.afterCommand()
	return nil
}

// query serves COM_QUERY: admit the text, answer SHOW LOCKPROXY and KILL
// itself, analyse, and serve the text whole or piece by piece.
func (s *session) query(p []byte) error {
	p = s.reading.ownConnectionID(p, s.be, s.id)
	release, refused := s.srv.admitStatement(p[1:], s.reading, s.status, s.be)
	defer func() { release() }()
	if errors.Is(refused, errStatementTooLong) {
		if an := s.text().analyzeLexically(p[1:], refused); an != nil {
			return s.serve(request{p: p, an: an, sql: an.SQL})
		}
	}
	if refused != nil {
		return s.writeErrAt(1, refused)
	}
	if isShow(p[1:]) {
		if done, err := s.showLockproxy(p[1:]); done {
			return err
		}
	}
	if s.client.multiStatements(s.client.caps) {
		text := string(p[1:])
		if at, _ := scanAs(s, text, func(o parser.ScanOptions) (int, bool) { return parser.KillCut(text, o), true }); at > 0 {
			// A KILL among other statements: each piece in turn, so
			// that the KILL is translated as when sent alone.
			release()
			release = func() {}
			return s.querySplit(p[1:], at)
		}
	}
	if isKill(p[1:]) {
		if hard, query, id, ok := readKill(p[1:]); ok {
			return s.kill(hard, query, id)
		}
	}
	if isShowProcesslist(p[1:]) {
		s.ex.processlist = s.srv.sessionThreads()
		defer func() { s.ex.processlist = nil }()
	}
	an, params, sql := s.text().analyzeQuery(p[1:])
	if at := s.splitAt(an, params, sql); at > 0 {
		release() // each piece is admitted on its own
		release = func() {}
		return s.querySplit(p[1:], at)
	}
	return s.serve(request{p: p, an: an, params: params, sql: sql})
}

// splitAt is where a multi-statement text that guarded statements follow
// is cut to be served piece by piece (see querySplit); 0 for a text served
// whole.
func (s *session) splitAt(an *parser.Analysis, params []any, sql string) int {
	if an == nil || an.SplitAt == 0 || s.ex.splitPieces >= maxSplitPieces || !s.srv.guardsMentioned(an.SQL) {
		return 0
	}
	if params != nil {
		an = s.text().analyzeText(sql) // SplitAt is an offset in the text
	}
	return an.SplitAt
}

// namesTracking reports whether a command's text names session_track: a
// COM_QUERY's, or the prepared statement's a COM_STMT_EXECUTE runs (the
// last prepared for MariaDB's direct execute is not looked up).
func (t *stmtTable) namesTracking(p []byte) bool {
	switch {
	case p[0] == mysql.COM_QUERY:
		return mentionsTracking(p[1:])
	case p[0] == mysql.COM_STMT_EXECUTE && len(p) >= 5:
		st := t.stmts[binary.LittleEndian.Uint32(p[1:])]
		return st != nil && mentionsTracking(st.query)
	}
	return false
}

// multiStatements reports whether the client's texts may hold several
// statements: it negotiated CLIENT_MULTI_STATEMENTS, or turned them on
// since with COM_SET_OPTION (and not off).
func (c *clientSettings) multiStatements(caps uint32) bool {
	switch c.multiOption {
	case 1:
		return true
	case 2:
		return false
	}
	return caps&mysql.CLIENT_MULTI_STATEMENTS != 0
}

// track updates what the session knows after a statement succeeded.
func (s *session) track(an *parser.Analysis, pl plan) {
	defer func() { s.ex.ddlAnnounced = false }()
	// Even a text that failed may have run a SET or a USE before its
	// error: the server says what its state is now.
	s.reading.noteChange(&s.ex, an, pl, s.srv.unforeseen.Load())
	if an == nil {
		// Multiplexing analysed it for what it pins: its DDL may make a
		// routine the next statements' pins depend on.
		an = s.mux.known
	}
	if an == nil || !s.ex.lastOK {
		return
	}
	for _, f := range an.Stmts {
		switch f.Kind {
		case parser.KindDDL:
			if s.srv.refreshesAfter(f.Text) {
				s.ddl.refreshSchemaAsync(s.srv, &s.ex)
			}
		}
	}
	if an.Unparsed && an.LexKind == parser.KindDDL {
		// CREATE TRIGGER, CREATE FUNCTION ... the parser does not know
		if s.srv.refreshesAfter(an.SQL) {
			s.ddl.refreshSchemaAsync(s.srv, &s.ex)
		}
	}
	if an.Unparsed && mayChangeDB([]byte(an.SQL)) {
		s.be.dbDirty = true
	}
}
