package proxy

import (
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
	// quote to a parser that reads bytes (parser.RewriteSafeCharset).
	charset string
	unsafe  bool
	// connection is the session's character_set_connection, which text
	// literals are converted to.
	connection string
	// exactNames: the server's lower_case_table_names is 0, so table
	// names and aliases compare case-sensitively.
	exactNames bool
	stale      bool // read them again before the next analysis
}

// sessionStateQuery reads what parsing depends on from the session's
// primary connection (lower_case_table_names is the server's, read with
// them for the same statement's sake).
const sessionStateQuery = "SELECT @@SESSION.sql_mode, @@SESSION.character_set_client, DATABASE(), @@lower_case_table_names, @@SESSION.character_set_connection"

// parseOptions are the options the session's texts are analysed under:
// the pinned primary's version (from its greeting) and the session's
// sql_mode, read again first when stale (with the client character set
// and the current database, see modeState). When they cannot be read the
// mode is parser.ModeUnknown, which makes every analysis Uncertain.
func (s *session) parseOptions() parser.Options {
	if s.be == nil {
		return parser.Options{Mode: parser.ModeUnknown}
	}
	if s.sqlMode.stale {
		row, err := s.be.queryRow(sessionStateQuery)
		if err == nil && len(row) != 5 {
			err = errNoRow
		}
		if err != nil {
			s.log.Warn("cannot read the session's sql_mode and character set; its statements are uncertain", zap.Error(err))
			s.unsafeCharset = true
			return parser.Options{Mode: parser.ModeUnknown, ServerVersion: parser.ServerVersionOf(s.be.version)}
		}
		cs := string(row[1])
		s.sqlMode = modeState{mode: parser.ParseSQLMode(string(row[0])), charset: cs, unsafe: !parser.RewriteSafeCharset(cs),
			exactNames: string(row[3]) == "0", connection: string(row[4])}
		s.unsafeCharset = s.sqlMode.unsafe
		if db := string(row[2]); db != s.db {
			s.db = db
			s.be.dbDirty = true
		}
	}
	return parser.Options{Mode: s.sqlMode.mode, ServerVersion: parser.ServerVersionOf(s.be.version), CaseSensitiveNames: s.sqlMode.exactNames}
}

// modeMayHaveChanged marks the session's sql_mode for reading again: a new
// primary connection was pinned, the connection was reset, or a command
// that set or may have set sql_mode succeeded.
func (s *session) modeMayHaveChanged() { s.sqlMode.stale = true }

// noteModeChange marks the sql_mode stale after a command whose plan says
// it may have changed it (plan.changesMode: SET sql_mode, also run by
// EXECUTE; EXECUTE of a statement lockproxy did not see; text it could
// not parse naming sql_mode or EXECUTE). An EXECUTE of a known statement
// that does not set it leaves the mode as it was. CALL is not among them:
// MariaDB restores the caller's sql_mode when a routine returns. Reading
// the mode is a query on the session's connection, which resets what
// FOUND_ROWS(), ROW_COUNT() and SHOW WARNINGS report, so it is done only
// when needed.
func (s *session) noteModeChange(pl plan) {
	if pl.changesMode && !s.srv.unforeseen.Load() {
		s.modeMayHaveChanged()
	}
}
