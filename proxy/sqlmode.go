package proxy

import (
	"slices"

	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// modeState is what a session knows of how its primary reads SQL text:
// the session's sql_mode and client character set (parsing depends on
// both: docs/cannot-see.md), and the database unqualified names mean. All
// three are the server's answer, read from the pinned connection when a
// statement is next analysed after anything that may have changed them,
// never lockproxy's reading of the text that changed them.
type modeState struct {
	mode parser.Mode
	// charset is the session's character_set_client; unsafe when a byte
	// of one of its multi-byte characters can read as a backslash or a
	// quote to a parser that reads bytes (parser.RewriteSafeCharset), or
	// when the state could not be read (until it is): lockproxy then
	// neither rewrites nor reads texts lexically.
	charset string
	unsafe  bool
	// connection is the session's character_set_connection, which text
	// literals are converted to.
	connection string
	// exactNames: the server's lower_case_table_names is 0, so table
	// names and aliases compare case-sensitively.
	exactNames bool
	// db is the session's current database (DATABASE()), what unqualified
	// names mean.
	db string
	// stale: read them again before the next analysis: a new primary
	// connection was pinned, the connection was reset, or a command that
	// set or may have set them succeeded.
	stale bool
}

// sessionStateQuery reads what parsing depends on from the session's
// primary connection (lower_case_table_names is the server's, read with
// them for the same statement's sake). It is a query of its own on the
// session's connection: it keeps the warnings (a SELECT without tables
// does), but what ROW_COUNT() and FOUND_ROWS() say next is about it, so
// the server's reports spare it where they can (confirmed).
const sessionStateQuery = "SELECT @@SESSION.sql_mode, @@SESSION.character_set_client, DATABASE(), @@lower_case_table_names, @@SESSION.character_set_connection"

// options are the options the session's texts are analysed under:
// the pinned primary's version (from its greeting) and the session's
// sql_mode, read again first when stale (with the client character set
// and the current database, see modeState). When they cannot be read the
// mode is parser.ModeUnknown, which makes every analysis Uncertain.
func (t textReader) options() parser.Options {
	if t.be == nil {
		return parser.Options{Mode: parser.ModeUnknown}
	}
	if t.be.sandbox && !t.be.leaveSandbox() {
		// Until its password changes the session runs SET only, and
		// its state cannot be read: every text is uncertain.
		t.m.stale, t.m.unsafe = true, true
		return parser.Options{Mode: parser.ModeUnknown, ServerVersion: parser.ServerVersionOf(t.be.version)}
	}
	if t.m.stale {
		row, err := t.be.queryRow(sessionStateQuery)
		if err == nil && len(row) != 5 {
			err = errNoRow
		}
		if err != nil {
			t.log.Warn("cannot read the session's sql_mode and character set; its statements are uncertain", zap.Error(err))
			t.m.unsafe = true
			return parser.Options{Mode: parser.ModeUnknown, ServerVersion: parser.ServerVersionOf(t.be.version)}
		}
		cs, db := string(row[1]), string(row[2])
		if db != t.m.db {
			t.be.dbDirty = true
		}
		*t.m = modeState{mode: parser.ParseSQLMode(string(row[0])), charset: cs, unsafe: !parser.RewriteSafeCharset(cs),
			exactNames: string(row[3]) == "0", connection: string(row[4]), db: db}
	}
	return parser.Options{Mode: t.m.mode, ServerVersion: parser.ServerVersionOf(t.be.version), CaseSensitiveNames: t.m.exactNames}
}

// noteChange marks the session's state stale after a command whose
// plan says it may have changed it (plan.changesMode: SET sql_mode, also
// run by EXECUTE; EXECUTE of a statement lockproxy did not see; text it
// could not parse naming sql_mode or EXECUTE) or that ran a USE, unless
// the server's report confirmed the change (confirmed). An EXECUTE of a
// known statement that does not set it leaves the mode as it was. CALL is
// not among them: MariaDB restores the caller's sql_mode and character
// sets when a routine returns.
func (m *modeState) noteChange(x *exchange, an *parser.Analysis, pl plan, unforeseen bool) {
	stale := (pl.changesMode || usesDB(an)) && !unforeseen && !x.confirmed(an)
	x.lastReport = 0
	if stale {
		m.stale = true
	}
}

// usesDB reports whether a text has a USE.
func usesDB(an *parser.Analysis) bool {
	return an != nil && slices.ContainsFunc(an.Stmts, func(f *parser.Facts) bool { return f.Kind == parser.KindUse })
}

// Bits of exchange.lastReport: what the report that ended the last result
// of a command named.
const (
	reportedMode reportBits = 1 << iota
	reportedClient
	reportedConnection
	reportedSchema
)

// reportBits are the parts of a session's state one report named.
type reportBits uint8

// confirmed reports whether the server's report of a command that
// succeeded named everything its one changing statement set: that
// statement came last (as in every piece of a split text), every other
// statement of the command changes nothing analysis depends on, and the
// report that ended the command's last result names each variable the
// statement sets (or, for USE, the database). The values were taken as
// the report arrived (noteReport). MariaDB does not report every
// spelling (a SET @@sql_mode = ... goes unreported), nor the connection
// character set a SET of collation_connection changes: those, dynamic
// SQL and anything else are read again.
func (x *exchange) confirmed(an *parser.Analysis) bool {
	if !x.lastOK || an == nil || an.Unparsed || len(an.Stmts) == 0 {
		return false
	}
	last := an.Stmts[len(an.Stmts)-1]
	for _, f := range an.Stmts[:len(an.Stmts)-1] {
		if f.MayChangeMode() || f.Kind == parser.KindUse {
			return false
		}
	}
	var need reportBits
	switch last.Kind {
	case parser.KindUse:
		need = reportedSchema
	case parser.KindSet:
		for _, v := range last.Effects.SessionVars {
			switch v {
			case "sql_mode":
				need |= reportedMode
			case "names", "character set", "charset":
				need |= reportedClient | reportedConnection
			case "character_set_client":
				need |= reportedClient
			case "character_set_connection":
				need |= reportedConnection
			case "collation_connection":
				return false
			}
		}
	default:
		return false
	}
	return x.lastReport&need == need
}

// readings are the ways the session's server (on be, its primary
// connection) may read text, for the
// lexical scan made before a statement is analysed (a KILL among other
// statements): the one its sql_mode,
// character set and version give when lockproxy knows them, else every
// reading the text's bytes allow (parser.EveryReading). It never asks the
// server: a query of lockproxy's in the client's transaction shows in its
// transaction state and resets ROW_COUNT(), so only a text whose readings
// disagree pays for one (scanAs).
func (m modeState) readings(text string, be *backendConn) []parser.ScanOptions {
	if be == nil || m.stale {
		return parser.EveryReading(text)
	}
	return []parser.ScanOptions{{Mode: m.mode, Charset: m.charset, ServerVersion: parser.ServerVersionOf(be.version)}}
}

// ownConnectionID rewrites CONNECTION_ID() in a COM_QUERY or
// COM_STMT_PREPARE packet to id, the session's own id, the one its
// greeting gave (be is its primary connection): the backend's thread id changes with the connection lockproxy uses
// (a replica, a new primary connection after COM_CHANGE_USER), and KILL
// takes lockproxy's ids. IS_USED_LOCK(), which answers the thread id of
// the lock's holder, answers that id too where the holder is the session's
// primary connection (user locks run there), so that
// `IS_USED_LOCK(name) = CONNECTION_ID()` holds as it does directly.
//
// The text is read every way the server may read it: a call inside a
// string literal is left alone, whatever sql_mode or character set makes
// it one.
func (m modeState) ownConnectionID(p []byte, be *backendConn, id uint32) []byte {
	if !parser.NamesConnectionCalls(p[1:]) {
		return p
	}
	if be == nil || (!m.stale && m.mode&(parser.ModeOracle|parser.ModeMSSQL|parser.ModeUnknown) != 0) {
		return p
	}
	// Every reading the text's bytes allow, not the session's state
	// before the text: a SET NAMES or SET sql_mode inside it changes how
	// the rest reads. A call is replaced only where all of them agree,
	// so no string literal is ever changed.
	text := string(p[1:])
	var q string
	var ok bool
	for i, o := range parser.EveryReading(text) {
		o.ServerVersion = parser.ServerVersionOf(be.version)
		r, replaced := parser.ReplaceConnectionID(text, id, o)
		if withLock, used := parser.ReplaceUsedLock(r, be.threadID, id, o); used {
			r, replaced = withLock, true
		}
		if i == 0 {
			q, ok = r, replaced
		} else if r != q || replaced != ok {
			return p
		}
	}
	if !ok {
		return p
	}
	return append([]byte{p[0]}, q...)
}
