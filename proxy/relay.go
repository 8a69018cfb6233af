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

// next reads the next physical packet from the backend, first flushing what
// the client has pending when the read might block, so rows stream as they
// arrive and a slow client holds back the backend instead of filling memory.
func (s *session) next() (byte, []byte, error) {
	if s.ex.src.r.buffered() == 0 {
		if err := s.cw.flush(); err != nil {
			return 0, nil, clientIOError{err}
		}
	}
	return s.ex.src.r.readPhysical()
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
// state goes through session.tracked on its way to the client.
func (s *session) passAs(kind passKind) ([]byte, error) {
	seq, p, err := s.next()
	if err != nil {
		return nil, err
	}
	s.ex.midResponse = true
	big := len(p) == maxPayload
	out := p
	if !big && kind != passPlain && (s.ex.src.key.track || s.ex.moreFollows) {
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
			p = s.tracked(p, ok)
			// The relay reads the backend's own status from p; the
			// client's copy says more results follow.
			out = s.ex.withMore(p, ok)
		}
	}
	if s.ex.inRows && s.ex.processlist != nil && !big {
		out = ownRowID(out, s.ex.processlist)
	}
	if err := s.cw.writePhysical(seq, out); err != nil {
		return nil, clientIOError{err}
	}
	if !big {
		return p, nil
	}
	for len(p) == maxPayload {
		if seq, p, err = s.next(); err != nil {
			return nil, err
		}
		if err := s.cw.writePhysical(seq, p); err != nil {
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
func (s *session) passRow(kind passKind) ([]byte, error) {
	if s.ex.src.r.buffered() < 4 {
		if err := s.cw.flush(); err != nil {
			return nil, clientIOError{err}
		}
	}
	n, err := s.ex.src.r.peekLen()
	if err != nil {
		return nil, err
	}
	if n <= streamAbove {
		return s.passAs(kind)
	}
	if n < maxPayload && s.ex.cap.wants() && s.mem.take(int64(n), shareAll) {
		s.ex.rowCharge += int64(n)
		return s.passAs(kind)
	}
	s.ex.midResponse = true
	for {
		n, err := s.ex.src.r.copyPhysical(s.cw)
		if err != nil || n < maxPayload {
			return nil, err
		}
		if s.ex.src.r.buffered() < 4 {
			if err := s.cw.flush(); err != nil {
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
	var err error
	switch kind {
	case relaySingle:
		err = s.relaySinglePacket()
	case relayFieldList:
		err = s.relayColumns(-1)
	case relayFetch:
		var st uint16
		var ok bool
		if st, ok, err = s.relayRows(s.caps&mysql.CLIENT_DEPRECATE_EOF != 0); err == nil && ok {
			s.status = st
		}
	default:
		err = s.relayResultSets()
	}
	if err != nil {
		return err
	}
	if s.ex.releaseEarly {
		s.ex.releaseEarly = false
		s.afterCommand()
	}
	if s.ex.shareOnEnd {
		s.shareWrites()
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

func (s *session) relaySinglePacket() error {
	p, err := s.passAs(passFirst)
	if err != nil {
		return err
	}
	s.ex.lastOK = len(p) > 0 && p[0] != mysql.ERR_HEADER
	if s.ex.lastOK && len(p) > 0 && p[0] == mysql.OK_HEADER {
		if st, ok := okStatus(p); ok {
			s.status = st
		}
	}
	return nil
}

// relayColumns passes n column definitions (n < 0: up to EOF) and, unless
// CLIENT_DEPRECATE_EOF, the EOF after them. It returns that EOF's status.
func (s *session) relayColumns(n int) error {
	deprecate := s.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	for i := 0; n < 0 || i < n; i++ {
		p, err := s.passAs(passEnd)
		if err != nil {
			return err
		}
		if n < 0 && p != nil && (p[0] == mysql.ERR_HEADER || isEOF(p, false)) {
			s.ex.lastOK = p[0] != mysql.ERR_HEADER
			return nil
		}
		if s.ex.cap != nil && p != nil {
			s.ex.cap.column(i, p, extendedMetadata(s.client.ext))
		}
	}
	if n >= 0 && !deprecate {
		p, err := s.passAs(passEnd)
		if err != nil {
			return err
		}
		if p == nil || !isEOF(p, false) {
			return errors.New("proxy: backend sent no EOF after column definitions")
		}
		s.ex.eofAfterColumns = resultStatus(p, false)
	}
	return nil
}

// relayResultSets passes OK/ERR/LOCAL INFILE/result sets until the backend
// says no more results exist.
func (s *session) relayResultSets() error {
	deprecate := s.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	for first := true; ; first = false {
		p, err := s.passAs(passFirst)
		if err != nil {
			return err
		}
		if p == nil {
			return errors.New("proxy: oversized first packet of a response")
		}
		var status uint16
		switch p[0] {
		case mysql.ERR_HEADER:
			s.ex.lastOK, s.ex.noneRan = false, first
			return nil
		case mysql.OK_HEADER:
			st, _ := okStatus(p)
			s.ex.lastOK = true
			s.ex.raised = s.ex.raised || resultWarnings(p, true) > 0
			status = st
			s.rwr.lastAffected, _, _, _ = readLenEncInt(p, 1)
		case mysql.LocalInFile_HEADER:
			if err := s.sendLocalFile(); err != nil {
				return err
			}
			continue
		default:
			n, _, _, err := readLenEncInt(p, 0)
			if err != nil {
				return err
			}
			s.ex.eofAfterColumns = 0
			if err := s.relayColumns(int(n)); err != nil {
				return err
			}
			if s.ex.eofAfterColumns&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
				s.ex.lastOK = true
				status = s.ex.eofAfterColumns
				break
			}
			st, ok, err := s.relayRows(deprecate)
			if err != nil || !ok {
				return err
			}
			status = st
		}
		s.status = status
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return nil
		}
		if s.ex.cap != nil {
			s.ex.cap.bad = true
		}
	}
}

// relayRows passes rows up to the terminating EOF/OK (ok=true, its status)
// or an ERR (ok=false).
func (s *session) relayRows(deprecate bool) (uint16, bool, error) {
	kind := passEnd
	if deprecate {
		kind = passEndOK
	}
	s.ex.inRows = true
	defer func() { s.ex.inRows = false }()
	for {
		p, err := s.passRow(kind)
		if err != nil {
			return 0, false, err
		}
		if p == nil {
			if s.ex.cap != nil {
				s.ex.cap.bad = true
			}
			continue // a large row
		}
		if p[0] == mysql.ERR_HEADER {
			s.ex.lastOK = false
			return 0, false, nil
		}
		if isEOF(p, deprecate) {
			s.ex.lastOK = true
			s.ex.raised = s.ex.raised || resultWarnings(p, deprecate) > 0
			return resultStatus(p, deprecate), true, nil
		}
		if s.ex.cap != nil {
			s.ex.cap.row(p)
		}
	}
}

// sendLocalFile relays LOAD DATA LOCAL INFILE content from the client to
// the backend, up to the client's empty packet.
func (s *session) sendLocalFile() error {
	if err := s.cw.flush(); err != nil {
		return clientIOError{err}
	}
	for {
		seq, p, err := s.cr.readPhysical()
		if err != nil {
			return clientIOError{err}
		}
		if err := s.ex.src.w.writePhysical(seq, p); err != nil {
			return err
		}
		if len(p) == 0 {
			return s.ex.src.w.flush()
		}
	}
}
