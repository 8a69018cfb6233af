package proxy

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
)

// Session state tracking. Every primary connection negotiates
// CLIENT_SESSION_TRACK, whatever its client did, and asks MariaDB to
// report changes of the current database and of the variables parsing
// depends on (trackSession). The reports arrive in OK packets: the values
// they carry become what the next statement is analysed under
// (noteReport), and a report lockproxy cannot take as it stands makes the
// session read its state again (sessionStateQuery) before the next
// analysis, so a change lockproxy did not foresee from the text
// (plan.changesMode) is still learnt from the server and never guessed. A
// client that did not negotiate CLIENT_SESSION_TRACK gets each OK as
// MariaDB would have sent it: without the state and without
// SERVER_SESSION_STATE_CHANGED.

// trackSession is run on a primary connection after login and after every
// COM_RESET_CONNECTION (which takes the session's variables back to their
// global values): it adds character_set_client, character_set_connection,
// collation_connection and sql_mode to the variables the server reports
// (the global list, kept for the client's sake, has character_set_client
// by default but not sql_mode; a SET of collation_connection changes
// character_set_connection without reporting it), turns schema tracking
// on, and asks for the flag that says any other state changed (a user
// variable, a temporary table, a variable not in the list).
const trackSession = "SET SESSION session_track_system_variables = " +
	"IF(FIND_IN_SET('*', @@global.session_track_system_variables), '*', " +
	"CONCAT_WS(',', NULLIF(@@global.session_track_system_variables, ''), 'character_set_client', 'character_set_connection', 'collation_connection', 'sql_mode')), " +
	"session_track_schema = ON, session_track_state_change = ON"

// Types of session state entries (MariaDB's enum_session_state_type).
const (
	trackSystemVariables = 0
	trackSchema          = 1
)

// okParts splits an OK packet (header 0x00, or 0xfe ending rows under
// CLIENT_DEPRECATE_EOF) of a connection that negotiated
// CLIENT_SESSION_TRACK: statusAt is the offset of its status flags, and
// info and state are the info string and the session state changes.
func okParts(p []byte) (statusAt int, info, state []byte, ok bool) {
	statusAt = statusOffset(p)
	if statusAt < 0 || statusAt+4 > len(p) {
		return 0, nil, nil, false
	}
	pos := statusAt + 4
	if pos == len(p) {
		return statusAt, nil, nil, true
	}
	var err error
	if info, pos, err = readLenEncBytes(p, pos); err != nil {
		return 0, nil, nil, false
	}
	if binary.LittleEndian.Uint16(p[statusAt:])&mysql.SERVER_SESSION_STATE_CHANGED != 0 && pos < len(p) {
		if state, _, err = readLenEncBytes(p, pos); err != nil {
			return 0, nil, nil, false
		}
	}
	return statusAt, info, state, true
}

// readLenEncBytes reads a length-encoded string at pos.
func readLenEncBytes(p []byte, pos int) ([]byte, int, error) {
	n, pos, _, err := readLenEncInt(p, pos)
	if err != nil {
		return nil, pos, err
	}
	if uint64(len(p)-pos) < n {
		return nil, pos, errShortPacket
	}
	return p[pos : pos+int(n)], pos + int(n), nil
}

// noteReport takes the session state changes of an OK as what the
// session's next statement is analysed under: the current database, the
// sql_mode and the client and connection character sets, as the server
// reports them, and notes in lastReport which it named. A report it
// cannot take as it stands (unreadable; of collation_connection without
// character_set_connection, whose change MariaDB then leaves unnamed; of
// the tracking variables themselves; from another connection than the
// session's) makes the session read its state again instead, which is
// always safe.
func (s *session) noteReport(state []byte) {
	if s.src != s.be {
		s.modeMayHaveChanged()
		return
	}
	collation := false
	for pos := 0; pos < len(state); {
		typ := state[pos]
		data, next, err := readLenEncBytes(state, pos+1)
		if err != nil {
			s.modeMayHaveChanged()
			return
		}
		pos = next
		var name, value []byte
		if typ == trackSchema || typ == trackSystemVariables {
			var at int
			if name, at, err = readLenEncBytes(data, 0); err == nil && typ == trackSystemVariables {
				value, _, err = readLenEncBytes(data, at)
			}
			if err != nil {
				s.modeMayHaveChanged()
				return
			}
		}
		switch {
		case typ == trackSchema:
			if string(name) != s.db {
				s.db = string(name)
				s.be.dbDirty = true
			}
			s.lastReport |= reportedSchema
		case typ != trackSystemVariables:
		case string(name) == "collation_connection":
			collation = true
		case string(name) == "session_track_system_variables", string(name) == "session_track_schema":
			s.modeMayHaveChanged()
		default:
			s.lastReport |= s.sqlMode.take(string(name), string(value))
		}
	}
	if collation && s.lastReport&reportedConnection == 0 {
		s.modeMayHaveChanged()
	}
	s.unsafeCharset = s.sqlMode.unsafe
}

// take applies one reported variable and says which part of the state it
// was (none: a variable analysis does not depend on).
func (m *modeState) take(name, value string) reportBits {
	switch name {
	case "sql_mode":
		m.mode = parser.ParseSQLMode(value)
		return reportedMode
	case "character_set_client":
		m.charset, m.unsafe = value, !parser.RewriteSafeCharset(value)
		return reportedClient
	case "character_set_connection":
		m.connection = value
		return reportedConnection
	}
	return 0
}

// tracked handles a packet of the relayed connection's response that may
// carry session state: an OK (ok) or an EOF. It notes a change that
// matters for analysis and returns the packet as the client must get it:
// unchanged for a client that negotiated CLIENT_SESSION_TRACK, else with
// the state and its status flag removed (in the session's scratch buffer,
// valid until the next call).
func (s *session) tracked(p []byte, ok bool) []byte {
	if s.src == nil || !s.src.key.track {
		return p
	}
	s.noteLent(p, ok)
	s.lastReport = 0 // a result ended: what its report names, if anything
	if !ok {
		if len(p) < 5 {
			return p
		}
		st := binary.LittleEndian.Uint16(p[3:])
		if st&mysql.SERVER_SESSION_STATE_CHANGED == 0 {
			return p
		}
		// Reported with no state: read the state again to be sure.
		s.modeMayHaveChanged()
		if s.caps&mysql.CLIENT_SESSION_TRACK != 0 {
			return p
		}
		s.trackBuf = append(s.trackBuf[:0], p...)
		binary.LittleEndian.PutUint16(s.trackBuf[3:], st&^mysql.SERVER_SESSION_STATE_CHANGED)
		return s.trackBuf
	}
	at, info, state, good := okParts(p)
	if !good {
		return p
	}
	st := binary.LittleEndian.Uint16(p[at:])
	if st&mysql.SERVER_SESSION_STATE_CHANGED == 0 {
		return p
	}
	if state == nil {
		s.modeMayHaveChanged() // a change with no state: read it to be sure
	} else {
		s.noteReport(state)
	}
	if s.caps&mysql.CLIENT_SESSION_TRACK != 0 {
		return p
	}
	// MariaDB writes the info string to a client without
	// CLIENT_SESSION_TRACK only when it is not empty.
	b := append(s.trackBuf[:0], p[:at+4]...)
	binary.LittleEndian.PutUint16(b[at:], st&^mysql.SERVER_SESSION_STATE_CHANGED)
	if len(info) > 0 {
		b = appendLenEncInt(b, uint64(len(info)))
		b = append(b, info...)
	}
	s.trackBuf = b
	return b
}

// querySplit runs a text whose statement ending at offset at may change
// how the statements after it are read (its sql_mode or client character
// set: parser.Analysis.SplitAt): the text up to that statement first, then
// the rest, analysed only once the server has run the change and the
// session has read its state again. The client gets the packets MariaDB
// sends for the whole text: one sequence, SERVER_MORE_RESULTS_EXISTS on
// every result but the last, and an error ends the text.
func (s *session) querySplit(q []byte, at int) error {
	s.splitPieces++
	defer func() {
		if s.splitPieces--; s.splitPieces == 0 {
			s.cw.shift = 0 // the text is answered
		}
	}()
	errs, more := s.errsWritten, s.moreFollows
	s.moreFollows = true
	err := s.query(append([]byte{mysql.COM_QUERY}, q[:at]...))
	s.moreFollows = more
	if err != nil || !s.lastOK || s.errsWritten != errs {
		return err
	}
	s.cw.shift = s.cw.next - 1 // the rest's answer starts at 1
	return s.query(append([]byte{mysql.COM_QUERY}, q[at:]...))
}

// maxSplitPieces bounds how many pieces one text is run in: each piece
// analyses the rest of the text again, so a text of many changes would
// otherwise cost analysis quadratic in its length. The rest of a text
// past the bound is planned whole, which refuses it as uncertain when it
// names a guarded table.
const maxSplitPieces = 32

// statusOut is the status lockproxy writes in the OK and EOF packets it
// makes: the session's, saying more results follow while a piece of a
// split text is answered.
func (s *session) statusOut() uint16 {
	if s.moreFollows {
		return s.status | mysql.SERVER_MORE_RESULTS_EXISTS
	}
	return s.status
}

// withMore returns the OK (ok) or EOF packet p as the client must get it
// while more pieces of a split text follow: with SERVER_MORE_RESULTS_EXISTS
// set (in the session's buffer, valid until the next call). Otherwise p.
func (s *session) withMore(p []byte, ok bool) []byte {
	if !s.moreFollows {
		return p
	}
	at := 3
	if ok {
		if at = statusOffset(p); at < 0 {
			return p
		}
	}
	if at+2 > len(p) {
		return p
	}
	s.moreBuf = append(s.moreBuf[:0], p...)
	st := binary.LittleEndian.Uint16(s.moreBuf[at:])
	binary.LittleEndian.PutUint16(s.moreBuf[at:], st|mysql.SERVER_MORE_RESULTS_EXISTS)
	return s.moreBuf
}

// guardsMentioned reports whether text names a table a rule guards (or
// rewrites), so that reading it with certainty matters.
func (s *session) guardsMentioned(text string) bool {
	rs := s.srv.ruleSet()
	return rs.Mentions(text) != nil || rs.MentionsRejectingUnpaired(text) != nil
}
