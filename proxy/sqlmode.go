package proxy

import (
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// modeState is what a session knows of how its primary reads SQL text:
// the server's version and the session's sql_mode (parsing depends on
// it: docs/cannot-see.md). The sql_mode is read from the pinned connection when a
// statement is next analysed after anything that may have changed it.
type modeState struct {
	mode  parser.Mode
	stale bool // the sql_mode must be read again before the next analysis
}

// sqlModeQuery reads the session's sql_mode on its primary connection.
const sqlModeQuery = "SELECT @@SESSION.sql_mode"

// parseOptions are the options the session's texts are analysed under:
// the pinned primary's version (from its greeting) and the session's
// sql_mode, read again first when stale. When it cannot be read the mode
// is parser.ModeUnknown, which makes every analysis Uncertain.
func (s *session) parseOptions() parser.Options {
	if s.be == nil {
		return parser.Options{Mode: parser.ModeUnknown}
	}
	if s.sqlMode.stale {
		v, err := s.be.queryValue(sqlModeQuery)
		if err != nil {
			s.log.Warn("cannot read the session's sql_mode; its statements are uncertain", zap.Error(err))
			return parser.Options{Mode: parser.ModeUnknown, ServerVersion: parser.ServerVersionOf(s.be.version)}
		}
		s.sqlMode = modeState{mode: parser.ParseSQLMode(string(v))}
	}
	return parser.Options{Mode: s.sqlMode.mode, ServerVersion: parser.ServerVersionOf(s.be.version)}
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
	if pl.changesMode {
		s.modeMayHaveChanged()
	}
}
