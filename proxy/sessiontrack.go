package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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

// trackSession is run on a primary connection after login, after every
// COM_RESET_CONNECTION (which takes the session's variables back to their
// global values) and after the client changed what its session tracks
// (clientTracking): to the variables the client's session reports
// (%s, the list as the server has it) it adds ownTracked, turns schema
// tracking on, and asks for the flag that says any other state changed
// (a user variable, a temporary table, a variable not in the list). The
// client gets only what its own settings ask for (clientTracking.filter).
const trackSession = "SET SESSION session_track_system_variables = '%s', session_track_schema = ON, session_track_state_change = ON"

// ownTracked are the variables lockproxy has a primary connection report
// besides the client's: those analysis depends on (a SET of
// collation_connection changes character_set_connection without
// reporting it) and the tracking variables themselves, so that a change
// of them, even in a stored routine, is reported.
var ownTracked = []string{"character_set_client", "character_set_connection", "collation_connection", "sql_mode",
	"session_track_system_variables", "session_track_schema", "session_track_state_change", "wait_timeout"}

// clientTrackingQuery reads what a primary connection's session tracks:
// before trackSession, the values the session started with (the
// server's globals); after it, lockproxy's, but for what the client set
// since.
const clientTrackingQuery = "SELECT @@SESSION.session_track_system_variables, @@SESSION.session_track_schema, @@SESSION.session_track_state_change, @@SESSION.wait_timeout"

// clientTracking is what the client of a primary connection asked MariaDB
// to report, as the server said: the variables of
// session_track_system_variables (all of them: every), and whether
// session_track_schema and session_track_state_change are on. A client
// that negotiated CLIENT_SESSION_TRACK gets the state and the status flag
// MariaDB would have sent it under these settings, not lockproxy's.
type clientTracking struct {
	every       bool
	vars        []string // lower case
	schema      bool
	stateChange bool
	// own is the list lockproxy set (trackSession): a list read back
	// that differs is the client's.
	own []string
}

// trackedList splits a session_track_system_variables value. The list is
// shared (trackedLists) and read-only: every primary connection tracks
// the same few lists, and each keeping its own copies cost a pinned
// session's connection most of a KiB.
func trackedList(v []byte) []string {
	trackedLists.mu.Lock()
	defer trackedLists.mu.Unlock()
	if l, ok := trackedLists.m[string(v)]; ok {
		return l
	}
	var out []string
	for _, n := range strings.Split(strings.ToLower(string(v)), ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	out = slices.Clip(out)
	if trackedLists.m == nil {
		trackedLists.m = make(map[string][]string)
	}
	if len(trackedLists.m) < maxTrackedLists {
		trackedLists.m[string(v)] = out
	}
	return out
}

// trackedLists is trackedList's lists by the value they were read from,
// and withOwnTracked's by the list they extend.
var trackedLists struct {
	mu  sync.Mutex
	m   map[string][]string
	own map[string][]string
}

// maxTrackedLists bounds trackedLists: clients may set lists of their own.
const maxTrackedLists = 64

// withOwnTracked is list with ownTracked's names it lacks added at its
// end, shared and read-only as trackedList's lists are.
func withOwnTracked(list []string) []string {
	if slices.Contains(list, "*") {
		return list
	}
	missing := false
	for _, n := range ownTracked {
		if !slices.Contains(list, n) {
			missing = true
			break
		}
	}
	if !missing {
		return list
	}
	k := strings.Join(list, ",")
	trackedLists.mu.Lock()
	defer trackedLists.mu.Unlock()
	if l, ok := trackedLists.own[k]; ok {
		return l
	}
	out := slices.Clone(list)
	for _, n := range ownTracked {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	out = slices.Clip(out)
	if trackedLists.own == nil {
		trackedLists.own = make(map[string][]string)
	}
	if len(trackedLists.own) < maxTrackedLists {
		trackedLists.own[k] = out
	}
	return out
}

// sameNames reports whether two lists name the same variables (the
// server keeps a list in an order of its own).
func sameNames(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(n string) bool { return !slices.Contains(b, n) })
}

// setVars takes a session_track_system_variables value as the client's.
func (c *clientTracking) setVars(v []byte) {
	c.vars = trackedList(v)
	c.every = slices.Contains(c.vars, "*")
}

// leaveSandbox starts a sandboxed connection's tracking once its
// session may run more than SET (its password changed), and reports
// whether it is out of the sandbox.
func (b *backendConn) leaveSandbox() bool {
	if err := b.startTracking(true); err != nil {
		b.broken = true
		return false
	}
	return !b.sandbox
}

// isOn reads a boolean variable's value as the server gives it.
func isOn(b []byte) bool { return string(b) == "1" || strings.EqualFold(string(b), "ON") }

// startTracking reads what the connection's session tracks for its client
// (fresh: the session just began, all of it is the client's; else only
// what differs from lockproxy's settings, the rest having come in the
// server's reports) and then turns on what lockproxy needs
// (trackSession).
//
// A session whose account's password expired is in MariaDB's sandbox,
// which runs SET statements only (SET PASSWORD among them) and refuses
// the read with 1820: its tracking is left as the login made it, the
// client's own, whose reports pass whole (sandbox), and is started once
// the password has been changed (leaveSandbox).
func (b *backendConn) startTracking(fresh bool) error {
	row, err := b.queryRow(clientTrackingQuery)
	var se *sqlError
	if errors.As(err, &se) && se.Code == erMustChangePassword {
		b.sandbox = true
		b.clientTrack = clientTracking{every: true, schema: true, stateChange: true}
		return nil
	}
	b.sandbox = false
	if err == nil && len(row) != 4 {
		err = errNoRow
	}
	if err != nil {
		return err
	}
	b.waitTimeout = seconds(row[3])
	c := &b.clientTrack
	list := trackedList(row[0])
	if fresh || !sameNames(list, c.own) {
		c.setVars(row[0])
	}
	if fresh || !isOn(row[1]) {
		c.schema = isOn(row[1])
	}
	if fresh || !isOn(row[2]) {
		c.stateChange = isOn(row[2])
	}
	c.own = withOwnTracked(list)
	if !sameNames(c.own, list) || !isOn(row[1]) || !isOn(row[2]) {
		own := strings.ReplaceAll(strings.ReplaceAll(strings.Join(c.own, ","), `\`, `\\`), "'", "''")
		return b.simpleCommand(append([]byte{mysql.COM_QUERY}, fmt.Sprintf(trackSession, own)...))
	}
	return nil
}

// filter appends to dst the entries of state (a session state block's
// content) that the client's own settings ask MariaDB for, in the order
// MariaDB wrote them. The transaction entries pass: lockproxy does not
// change session_track_transaction_info.
func (c *clientTracking) filter(dst, state []byte) ([]byte, bool) {
	for pos := 0; pos < len(state); {
		typ := state[pos]
		_, next, err := readLenEncBytes(state, pos+1)
		if err != nil {
			return dst, false
		}
		entry := state[pos:next]
		pos = next
		switch typ {
		case trackSchema:
			if !c.schema {
				continue
			}
		case trackStateChange:
			if !c.stateChange {
				continue
			}
		case trackSystemVariables:
			if !c.every {
				data, _, _ := readLenEncBytes(entry, 1)
				name, _, err := readLenEncBytes(data, 0)
				if err != nil {
					return dst, false
				}
				if !slices.Contains(c.vars, strings.ToLower(string(name))) {
					continue
				}
			}
		}
		dst = append(dst, entry...)
	}
	return dst, true
}

// mentionsTracking reports whether a text names session_track (ASCII case
// folded): after it, the client's tracking is read again from the server.
// It looks only around the text's underscores.
func mentionsTracking[T string | []byte](q T) bool {
	const before, after = "session", "track"
	for i := len(before); i+len(after) < len(q); i++ {
		if q[i] == '_' && foldedIs(q[i-len(before):i], before) && foldedIs(q[i+1:i+1+len(after)], after) {
			return true
		}
	}
	return false
}

// containsFolded reports whether q holds word (lower-case ASCII),
// ignoring ASCII case, without allocating.
func containsFolded[T string | []byte](q T, word string) bool {
	for i := 0; i+len(word) <= len(q); i++ {
		if foldedIs(q[i:], word) {
			return true
		}
	}
	return false
}

// foldedIs reports whether b, ASCII letters folded to lower case, is word.
func foldedIs[T string | []byte](b T, word string) bool {
	for i := range len(word) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// retrack reads again what the client's session tracks and turns on what
// lockproxy needs: after a text that named the tracking variables or a
// report of a change of them, once the command is answered.
func (s *session) retrack() error {
	s.ex.trackChanged, s.ex.trackText = false, false
	if s.be == nil || !s.be.key.track || s.be.broken {
		return nil
	}
	s.reading.stale = true
	if err := s.be.startTracking(false); err != nil {
		return s.backendFailed(s.be, fmt.Errorf("proxy: turning on session state tracking again: %w", err))
	}
	return nil
}

// Types of session state entries (MariaDB's enum_session_state_type).
const (
	trackSystemVariables = 0
	trackSchema          = 1
	trackStateChange     = 2
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

// noteReport takes the session state changes of an OK of x's source as
// what the session's next statement is analysed under: the current
// database (schema, when the report named it: named), the sql_mode and the
// client and connection character sets, as the server reports them, and
// notes in lastReport which it named. be is the session's primary
// connection. A report it
// cannot take as it stands (unreadable; of collation_connection without
// character_set_connection, whose change MariaDB then leaves unnamed; of
// the tracking variables themselves; from another connection than the
// session's) makes the session read its state again instead, which is
// always safe.
func (m *modeState) noteReport(x *exchange, be *backendConn, state []byte) (schema string, named bool) {
	if x.src != be {
		m.stale = true
		return "", false
	}
	collation := false
	for pos := 0; pos < len(state); {
		typ := state[pos]
		data, next, err := readLenEncBytes(state, pos+1)
		if err != nil {
			m.stale = true
			return schema, named
		}
		pos = next
		var name, value []byte
		if typ == trackSchema || typ == trackSystemVariables {
			var at int
			if name, at, err = readLenEncBytes(data, 0); err == nil && typ == trackSystemVariables {
				value, _, err = readLenEncBytes(data, at)
			}
			if err != nil {
				m.stale = true
				return schema, named
			}
		}
		switch {
		case typ == trackSchema:
			schema, named = string(name), true
			x.lastReport |= reportedSchema
		case typ != trackSystemVariables:
		case string(name) == "collation_connection":
			collation = true
		case string(name) == "session_track_system_variables":
			be.clientTrack.setVars(value)
			x.trackChanged = true
		case string(name) == "session_track_schema":
			be.clientTrack.schema = isOn(value)
			x.trackChanged = true
		case string(name) == "session_track_state_change":
			be.clientTrack.stateChange = isOn(value)
			x.trackChanged = true
		case string(name) == "wait_timeout":
			x.waitTimeout, x.waitReported = seconds(value), true
		default:
			x.lastReport |= m.take(string(name), string(value))
		}
	}
	if collation && x.lastReport&reportedConnection == 0 {
		m.stale = true
	}
	return schema, named
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
// matters for analysis and returns the packet as the client must get it
// (in the session's scratch buffer, valid until the next call): for a
// client that negotiated CLIENT_SESSION_TRACK, with only the state its
// own tracking asks for (clientTracking), else with no state; and with
// SERVER_SESSION_STATE_CHANGED only when state remains.
func (s *session) tracked(p []byte, ok bool) []byte {
	if s.ex.src == nil || !s.ex.src.key.track {
		if s.ex.src != nil && s.ex.src.key.readOnly && resultWarnings(p, ok) > 0 {
			s.mux.warned = true // a replica read's, kept with its connection (settleReplica)
		}
		return p
	}
	if s.ex.src == s.be {
		s.mux.noteLent(p, ok)
	}
	s.ex.lastReport = 0 // a result ended: what its report names, if anything
	if !ok {
		if len(p) < 5 {
			return p
		}
		st := binary.LittleEndian.Uint16(p[3:])
		if st&mysql.SERVER_SESSION_STATE_CHANGED == 0 {
			return p
		}
		// Reported with no state: read the state again to be sure.
		s.reading.stale = true
		if s.client.caps&mysql.CLIENT_SESSION_TRACK != 0 {
			return p
		}
		s.ex.trackBuf = append(s.ex.trackBuf[:0], p...)
		binary.LittleEndian.PutUint16(s.ex.trackBuf[3:], st&^mysql.SERVER_SESSION_STATE_CHANGED)
		return s.ex.trackBuf
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
		s.reading.stale = true // a change with no state: read it to be sure
	} else {
		if db, named := s.reading.noteReport(&s.ex, s.be, state); named && db != s.reading.db {
			s.reading.db = db
			s.be.dbDirty = true
		}
	}
	var keep []byte
	if s.client.caps&mysql.CLIENT_SESSION_TRACK != 0 {
		if (s.ex.trackText || s.ex.trackChanged) && st&mysql.SERVER_MORE_RESULTS_EXISTS == 0 && s.ex.src == s.be && s.ex.src.r.buffered() == 0 {
			// The text's last result: its settings are the client's
			// now, read before the OK goes out so that it is filtered
			// under them; the server has answered the whole command.
			p = append(s.ex.okCopy[:0], p...)
			s.ex.okCopy = p
			at, info, state, _ = okParts(p)
			s.ex.trackText = false
			s.reading.stale = true
			if err := s.ex.src.startTracking(false); err != nil {
				s.ex.trackChanged = true // retrack, at the command's end, reports it
			}
		}
		var whole bool
		if keep, whole = s.ex.src.clientTrack.filter(s.ex.stateBuf[:0], state); !whole {
			return p
		}
		s.ex.stateBuf = keep
	}
	// MariaDB writes the info string only when it or the state is not
	// empty.
	b := append(s.ex.trackBuf[:0], p[:at+4]...)
	if len(keep) == 0 {
		binary.LittleEndian.PutUint16(b[at:], st&^mysql.SERVER_SESSION_STATE_CHANGED)
	}
	if len(keep) > 0 || len(info) > 0 {
		b = appendLenEncInt(b, uint64(len(info)))
		b = append(b, info...)
	}
	if len(keep) > 0 {
		b = appendLenEncInt(b, uint64(len(keep)))
		b = append(b, keep...)
	}
	s.ex.trackBuf = b
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
	s.ex.splitPieces++
	defer func() {
		if s.ex.splitPieces--; s.ex.splitPieces == 0 {
			s.cw.shift = 0 // the text is answered
		}
	}()
	errs, more := s.errsWritten, s.ex.moreFollows
	s.ex.moreFollows = true
	err := s.query(append([]byte{mysql.COM_QUERY}, q[:at]...))
	s.ex.moreFollows = more
	if err != nil || !s.ex.lastOK || s.errsWritten != errs {
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
func (x *exchange) statusOut(status uint16) uint16 {
	if x.moreFollows {
		return status | mysql.SERVER_MORE_RESULTS_EXISTS
	}
	return status
}

// withMore returns the OK (ok) or EOF packet p as the client must get it
// while more pieces of a split text follow: with SERVER_MORE_RESULTS_EXISTS
// set (in the session's buffer, valid until the next call). Otherwise p.
func (x *exchange) withMore(p []byte, ok bool) []byte {
	if !x.moreFollows {
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
	x.moreBuf = append(x.moreBuf[:0], p...)
	st := binary.LittleEndian.Uint16(x.moreBuf[at:])
	binary.LittleEndian.PutUint16(x.moreBuf[at:], st|mysql.SERVER_MORE_RESULTS_EXISTS)
	return x.moreBuf
}

// guardsMentioned reports whether text names a table a rule guards (or
// rewrites), so that reading it with certainty matters.
func (s *Server) guardsMentioned(text string) bool {
	rs := s.ruleSet()
	return rs.Mentions(text) != nil || rs.MentionsRejectingUnpaired(text) != nil
}
