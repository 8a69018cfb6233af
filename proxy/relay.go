package proxy

import (
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// relayKind says what shape of response a command gets.
type relayKind int

const (
	relayNone      relayKind = iota // no response (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA)
	relaySingle                     // one packet: OK, ERR, EOF or a string (COM_PING, COM_STATISTICS, COM_SET_OPTION)
	relayResults                    // OK, ERR, LOCAL INFILE or result sets, possibly several
	relayFieldList                  // column definitions up to EOF, or ERR
	relayFetch                      // rows of an open cursor up to EOF, or ERR (COM_STMT_FETCH)
)

// clientIOError marks a failure to talk to the client, as opposed to the
// backend, so the session knows which side broke.
type clientIOError struct{ error }

func (e clientIOError) Unwrap() error { return e.error }

var errQuit = errors.New("proxy: client quit")

// responseRelay passes one backend response (x.src's) to the client: what
// it learns of the command goes into x, the exchange; the server status
// each result ends with into status and an OK's affected rows into
// affected (the session's); each OK or EOF that may carry session state
// goes through track.
type responseRelay struct {
	x        *exchange
	cw       *packetWriter
	cr       *packetReader // the client's LOCAL INFILE content
	mem      *sessionMem   // charged for large rows a capture holds
	caps     uint32        // the client's capabilities
	ext      uint32        // its MariaDB extended capabilities
	track    tracker
	status   *uint16
	affected *uint64
	// idle clears the idle timeout's deadline before cr is read.
	idle interface{ clearIdleDeadline() }
}

// tracker gives an OK or EOF as the client must get it (session.tracked).
type tracker interface {
	tracked(p []byte, ok bool) []byte
}

// responseRelay is the relay of the command being served.
func (s *session) responseRelay() responseRelay {
	return responseRelay{x: &s.ex, cw: s.cw, cr: s.cr, idle: s, mem: s.mem, caps: s.client.caps, ext: s.client.ext,
		track: s, status: &s.status, affected: &s.rwr.lastAffected}
}

// next reads the next physical packet from the backend, first flushing what
// the client has pending when the read might block, so rows stream as they
// arrive and a slow client holds back the backend instead of filling memory.
func (r *responseRelay) next() (byte, []byte, error) {
	if r.x.src.r.buffered() == 0 {
		if err := r.cw.flush(); err != nil {
			return 0, nil, clientIOError{err}
		}
	}
	return r.x.src.r.readPhysical()
}

// passKind says which packets pass may find session state in.
type passKind uint8

const (
	passPlain passKind = iota
	passFirst          // the first packet of a response: an OK carries state
	passEnd            // a column definition or row, or the EOF after them
	passEndOK          // a row, or the OK ending rows under CLIENT_DEPRECATE_EOF
)

// passAs is pass for a packet of kind: an OK or EOF that may carry session
// state goes through track on its way to the client.
func (r *responseRelay) passAs(kind passKind) ([]byte, error) {
	seq, p, err := r.next()
	if err != nil {
		return nil, err
	}
	r.x.midResponse = true
	big := len(p) == maxPayload
	out := p
	if !big && kind != passPlain && (r.x.src.key.track || r.x.src.key.readOnly || r.x.moreFollows) {
		ok, end := false, false
		switch {
		case kind == passFirst && len(p) > 0 && p[0] == mysql.OK_HEADER:
			ok, end = true, true
		case kind == passEnd && isEOF(p, false):
			end = true
		case kind == passEndOK && isEOF(p, true):
			ok, end = true, true
		}
		if end {
			p = r.track.tracked(p, ok)
			// The relay reads the backend's own status from p; the
			// client's copy says more results follow.
			out = r.x.withMore(p, ok)
		}
	}
	if r.x.inRows && r.x.processlist != nil && !big {
		out = ownRowID(out, r.x.processlist)
	}
	if err := r.cw.writePhysical(seq, out); err != nil {
		return nil, clientIOError{err}
	}
	if !big {
		return p, nil
	}
	for len(p) == maxPayload {
		if seq, p, err = r.next(); err != nil {
			return nil, err
		}
		if err := r.cw.writePhysical(seq, p); err != nil {
			return nil, clientIOError{err}
		}
	}
	return nil, nil
}

// streamAbove is the largest result row the relay holds whole: a larger
// one is passed to the client piece by piece (packetReader.copyPhysical),
// so rows of any size cost each session no more than its buffers, unless
// a capture needs the row and the session's memory budget holds it.
const streamAbove = freePacketBuf

// passRow is pass for a result row. A row over streamAbove bytes is held
// whole only for a capture that needs it, charged to the session's memory
// budget until the command ends (shrinkBuffers); otherwise it is streamed
// and passRow returns nil, as pass does for a row over 16 MiB.
func (r *responseRelay) passRow(kind passKind) ([]byte, error) {
	if r.x.src.r.buffered() < 4 {
		if err := r.cw.flush(); err != nil {
			return nil, clientIOError{err}
		}
	}
	n, err := r.x.src.r.peekLen()
	if err != nil {
		return nil, err
	}
	if n <= streamAbove {
		return r.passAs(kind)
	}
	if n < maxPayload && r.x.cap.wants() && r.mem.take(int64(n), shareAll) {
		r.x.rowCharge += int64(n)
		return r.passAs(kind)
	}
	r.x.midResponse = true
	for {
		n, err := r.x.src.r.copyPhysical(r.cw)
		if err != nil || n < maxPayload {
			return nil, err
		}
		if r.x.src.r.buffered() < 4 {
			if err := r.cw.flush(); err != nil {
				return nil, clientIOError{err}
			}
		}
	}
}

// relay passes the backend's whole response to the client and records the
// final server status and whether it ended in success.
func (s *session) relay(kind relayKind, binary bool) error {
	s.ex.midResponse, s.ex.noneRan, s.ex.raised = false, false, false
	defer func() { s.ex.midResponse = false }()
	r := s.responseRelay()
	if err := r.run(kind); err != nil {
		return err
	}
	if s.ex.releaseEarly {
		s.ex.releaseEarly = false
		s.afterCommand()
	}
	if s.ex.shareOnEnd {
		s.route.shareWrites(&s.ex, &s.srv.marks, s.be, s.user, inTxn(s.status))
	}
	if s.ex.ddlWord && s.ex.lastOK {
		s.ex.ddlWord, s.ex.ddlAnnounced = false, true
		s.srv.announceSchemaChange()
	}
	if err := s.cw.flush(); err != nil {
		return clientIOError{err}
	}
	return nil
}

// run passes the response of a command of kind.
func (r *responseRelay) run(kind relayKind) error {
	switch kind {
	case relaySingle:
		return r.singlePacket()
	case relayFieldList:
		return r.columns(-1)
	case relayFetch:
		st, ok, err := r.rows(r.caps&mysql.CLIENT_DEPRECATE_EOF != 0)
		if err == nil && ok {
			*r.status = st
		}
		return err
	}
	return r.resultSets()
}

func (r *responseRelay) singlePacket() error {
	p, err := r.passAs(passFirst)
	if err != nil {
		return err
	}
	r.x.lastOK = len(p) > 0 && p[0] != mysql.ERR_HEADER
	if r.x.lastOK && len(p) > 0 && p[0] == mysql.OK_HEADER {
		if st, ok := okStatus(p); ok {
			*r.status = st
		}
	}
	return nil
}

// columns passes n column definitions (n < 0: up to EOF) and, unless
// CLIENT_DEPRECATE_EOF, the EOF after them. It returns that EOF's status.
func (r *responseRelay) columns(n int) error {
	deprecate := r.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	for i := 0; n < 0 || i < n; i++ {
		p, err := r.passAs(passEnd)
		if err != nil {
			return err
		}
		if n < 0 && p != nil && (p[0] == mysql.ERR_HEADER || isEOF(p, false)) {
			r.x.lastOK = p[0] != mysql.ERR_HEADER
			return nil
		}
		if r.x.cap != nil && p != nil {
			r.x.cap.column(i, p, extendedMetadata(r.ext))
		}
	}
	if n >= 0 && !deprecate {
		p, err := r.passAs(passEnd)
		if err != nil {
			return err
		}
		if p == nil || !isEOF(p, false) {
			return errors.New("proxy: backend sent no EOF after column definitions")
		}
		r.x.eofAfterColumns = resultStatus(p, false)
	}
	return nil
}

// resultSets passes OK/ERR/LOCAL INFILE/result sets until the backend
// says no more results exist.
func (r *responseRelay) resultSets() error {
	deprecate := r.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	for first := true; ; first = false {
		p, err := r.passAs(passFirst)
		if err != nil {
			return err
		}
		if p == nil {
			return errors.New("proxy: oversized first packet of a response")
		}
		var status uint16
		switch p[0] {
		case mysql.ERR_HEADER:
			r.x.lastOK, r.x.noneRan = false, first
			return nil
		case mysql.OK_HEADER:
			st, _ := okStatus(p)
			r.x.lastOK = true
			r.x.raised = r.x.raised || resultWarnings(p, true) > 0
			status = st
			*r.affected, _, _, _ = readLenEncInt(p, 1)
		case mysql.LocalInFile_HEADER:
			if err := r.sendLocalFile(); err != nil {
				return err
			}
			continue
		default:
			n, _, _, err := readLenEncInt(p, 0)
			if err != nil {
				return err
			}
			r.x.eofAfterColumns = 0
			if err := r.columns(int(n)); err != nil {
				return err
			}
			if r.x.eofAfterColumns&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
				r.x.lastOK = true
				status = r.x.eofAfterColumns
				break
			}
			st, ok, err := r.rows(deprecate)
			if err != nil || !ok {
				return err
			}
			status = st
		}
		*r.status = status
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return nil
		}
		if r.x.cap != nil {
			r.x.cap.bad = true
		}
	}
}

// rows passes rows up to the terminating EOF/OK (ok=true, its status)
// or an ERR (ok=false).
func (r *responseRelay) rows(deprecate bool) (uint16, bool, error) {
	kind := passEnd
	if deprecate {
		kind = passEndOK
	}
	r.x.inRows = true
	defer func() { r.x.inRows = false }()
	for {
		p, err := r.passRow(kind)
		if err != nil {
			return 0, false, err
		}
		if p == nil {
			if r.x.cap != nil {
				r.x.cap.bad = true
			}
			continue // a large row
		}
		if p[0] == mysql.ERR_HEADER {
			r.x.lastOK = false
			return 0, false, nil
		}
		if isEOF(p, deprecate) {
			r.x.lastOK = true
			r.x.raised = r.x.raised || resultWarnings(p, deprecate) > 0
			return resultStatus(p, deprecate), true, nil
		}
		if r.x.cap != nil {
			r.x.cap.row(p)
		}
	}
}

// sendLocalFile relays LOAD DATA LOCAL INFILE content from the client to
// the backend, up to the client's empty packet.
func (r *responseRelay) sendLocalFile() error {
	if err := r.cw.flush(); err != nil {
		return clientIOError{err}
	}
	r.idle.clearIdleDeadline() // the content may take its time
	for {
		seq, p, err := r.cr.readPhysical()
		if err != nil {
			return clientIOError{err}
		}
		if err := r.x.src.w.writePhysical(seq, p); err != nil {
			return err
		}
		if len(p) == 0 {
			return r.x.src.w.flush()
		}
	}
}
