package proxy

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/prometheus/client_golang/prometheus"
)

// Multiplexing (backends.pool.multiplex). A session that multiplexes
// holds a primary connection only while something ties it to one: it
// borrows a connection when a command comes (dispatchLent), and gives it
// back once the command is answered and nothing pins it: no transaction
// open, autocommit on, none of the pin reasons (pool_pins.go). A connection given
// back goes to the pool as it is when the server reported no change of
// its session state during the loan (and the session left its database
// as the login's), else reset (COM_RESET_CONNECTION, pool.reset); the
// next loan gives the session's current database to whichever connection
// it gets (COM_INIT_DB).
//
// What ties a session to its connection is judged fail-closed from what
// the server reports (transaction and autocommit status, session state
// changes, the insert id of an OK) and from the statement's analysis: a
// reason found pins the session before the statement runs, and stays
// until the state is gone (COMMIT for a transaction, SET autocommit = 1,
// UNLOCK TABLES, COM_RESET_CONNECTION and COM_CHANGE_USER for all) or for
// the session's life. Locks are untouched: they belong to the session and
// its transaction whichever connection carries it.

// muxState is what multiplexing keeps of a session; only the session's
// goroutine touches it.
type muxState struct {
	on  bool    // the session multiplexes (backends.pool.multiplex at login)
	key poolKey // the login's connections: what the session borrows
	// pins are the reasons that outlive the command (statusPins adds the
	// server status's); shown is what lockproxy_sessions_pinned counts
	// of the session.
	pins, shown pinReason
	// changed: the server reported a change of the lent connection's
	// session state, so it is reset when given back.
	changed bool
	// warned: a result of the command reported warnings; keepsDiag: its
	// statements may leave the diagnostics area as it was unless they
	// raise a condition (diagnosticsEffect: surely or perhaps), so SHOW
	// WARNINGS may still find an earlier statement's there: the
	// connection is kept while it may.
	warned, keepsDiag bool
	// fresh: the lent connection was borrowed for the command being
	// served, so the previous statement ran on another one.
	fresh bool
	// known is the analysis pinFor made of the command's text when
	// nothing else analysed it (lastKnown), for the schema read after
	// its DDL (track).
	known *parser.Analysis
	// cmdPins are the reasons the command's statements gave (pinFor);
	// readsDiagnostics: they only read the previous statement's
	// diagnostics; unlocks: one is UNLOCK TABLES.
	cmdPins                   pinReason
	readsDiagnostics, unlocks bool
	// loan counts the connections the session has borrowed, and setsGen
	// the changes of its replayed SETs (sets): a prepared statement made
	// on an earlier loan is prepared again on the current one, under the
	// same SETs (pool_stmt.go). held are the reasons its prepared
	// statements give until they are executed, reset or closed (long
	// data sent, a cursor open).
	loan, setsGen uint32
	held          pinReason
	// idle is the session's wait_timeout, as the server reports it: a
	// session that holds no connection is ended after that long idle, as
	// MariaDB ends its connection (idleLimit).
	idle time.Duration
	// askIdle: a SET of wait_timeout came without the server's report,
	// so idle is asked for before the connection is given back (asked
	// earlier, the question would be what ROW_COUNT() and FOUND_ROWS()
	// next describe on a connection the session keeps).
	askIdle bool
	// sets are the session's SETs of session variables replayed on each
	// connection it borrows (replaySets), in order, the last per set of
	// variables; pending are the command's, kept once it succeeded, and
	// replaying the variables they set, which a report of the command
	// names without pinning the session.
	sets, pending []replayedSet
	replaying     map[string]bool
}

// replayedSet is a SET a multiplexing session replays: its text and the
// variables it sets, sorted and joined (which SET a later one replaces).
type replayedSet struct {
	text, vars string
}

// maxReplayedSets bounds the SETs a session replays on each borrow; a
// session past it is pinned instead.
const maxReplayedSets = 16

// replayableVars are the session variables whose SET a multiplexing
// session replays on the connection it borrows instead of keeping one:
// settings whose value is the same wherever they are set again and that
// nothing consumes (not insert_id, last_insert_id, gtid_seq_no, the
// random seeds), and not the session tracking lockproxy itself relies on.
// Each reports, in the server's session state, under the names of
// reportedAs.
var replayableVars = map[string]bool{
	"sql_mode": true, "time_zone": true, "names": true, "character set": true, "charset": true,
	"character_set_client": true, "character_set_connection": true, "character_set_results": true,
	"collation_connection": true, "max_statement_time": true, "max_sort_length": true,
	"sql_select_limit": true, "group_concat_max_len": true, "wait_timeout": true,
	"interactive_timeout": true, "net_read_timeout": true, "net_write_timeout": true,
	"innodb_lock_wait_timeout": true, "lock_wait_timeout": true, "optimizer_switch": true,
	"optimizer_search_depth": true, "join_buffer_size": true, "sort_buffer_size": true,
	"tmp_table_size": true, "max_heap_table_size": true, "div_precision_increment": true,
	"sql_safe_updates": true, "sql_big_selects": true, "big_tables": true,
	"foreign_key_checks": true, "unique_checks": true, "sql_auto_is_null": true,
	"sql_quote_show_create": true, "sql_notes": true, "sql_warnings": true,
	"lc_time_names": true, "default_week_format": true, "max_join_size": true,
	"auto_increment_increment": true, "auto_increment_offset": true, "long_query_time": true,
	"tx_isolation": true, "transaction_isolation": true, "tx_read_only": true, "transaction_read_only": true,
}

// reportedAs are the variables the server's report names for a SET of
// the shorthand forms.
var reportedAs = map[string][]string{
	"names":         {"character_set_client", "character_set_connection", "character_set_results", "collation_connection"},
	"character set": {"character_set_client", "character_set_results", "character_set_connection", "collation_connection"},
	"charset":       {"character_set_client", "character_set_results", "character_set_connection", "collation_connection"},
}

// replay takes f, a statement of the command that pins the session for a
// session variable, to be replayed instead when it can be: a SET of
// replayable variables only, to literals, with no user variable, global,
// autocommit or transaction of the next transaction alone in it.
func (m *muxState) replay(f *parser.Facts) bool {
	e := f.Effects
	if f.Kind != parser.KindSet || e.SetComputed || len(e.UserVars) > 0 || len(e.GlobalVars) > 0 ||
		e.Autocommit != parser.AutocommitUnchanged || e.SetTransaction && e.SetTransactionScope != "session" ||
		len(m.sets)+len(m.pending) >= maxReplayedSets {
		return false
	}
	vars := slices.Clone(e.SessionVars)
	for _, v := range e.SessionVars {
		// A transaction characteristic has two names; the isolation
		// level and the access mode are two settings, so a SET of one
		// does not replace an earlier SET of the other.
		if a, ok := txnAliases[v]; ok {
			vars = append(vars, a)
		}
	}
	if len(vars) == 0 {
		return false
	}
	for _, v := range vars {
		if !replayableVars[v] {
			return false
		}
	}
	if m.replaying == nil {
		m.replaying = map[string]bool{}
	}
	for _, v := range vars {
		m.replaying[v] = true
		for _, r := range reportedAs[v] {
			m.replaying[r] = true
		}
	}
	slices.Sort(vars)
	m.pending = append(m.pending, replayedSet{text: f.Text, vars: strings.Join(slices.Compact(vars), ",")})
	return true
}

// txnAliases name each transaction characteristic's other name.
var txnAliases = map[string]string{"tx_isolation": "transaction_isolation", "transaction_isolation": "tx_isolation",
	"tx_read_only": "transaction_read_only", "transaction_read_only": "tx_read_only"}

// keepPending keeps the command's SETs, which succeeded, for every
// connection the session borrows from now on: each replaces an earlier
// one of the same variables.
func (m *muxState) keepPending() {
	if len(m.pending) > 0 {
		m.setsGen++
	}
	for _, p := range m.pending {
		m.sets = slices.DeleteFunc(m.sets, func(s replayedSet) bool { return s.vars == p.vars })
		m.sets = append(m.sets, p)
	}
	m.pending = m.pending[:0]
}

// replaySets runs the session's SETs on be, a connection it borrows; the
// connection is reset when given back.
func (m *muxState) replaySets(be *backendConn) error {
	for _, s := range m.sets {
		if err := be.simpleCommand(append([]byte{mysql.COM_QUERY}, s.text...)); err != nil {
			return err
		}
		m.changed = true
	}
	return nil
}

// errStateElsewhere: a statement reads what the previous statement left
// on its backend connection (FOUND_ROWS(), ROW_COUNT()), and
// multiplexing gave that connection back (1105).
var errStateElsewhere = errors.New("proxy: the previous statement's connection state is gone")

// startMultiplex is run once a login (or COM_CHANGE_USER) has pinned its
// connection: under backends.pool.multiplex the session gives it back at
// once and borrows one for each command from then on.
func (s *session) startMultiplex() {
	was := s.mux
	s.mux = muxState{on: s.srv.config().Backends.Pool.Multiplex, key: s.be.key, shown: was.shown,
		loan: was.loan + 1, setsGen: was.setsGen + 1, idle: s.be.waitTimeout}
	if s.be.sandbox || s.be.key.relay.passed {
		// Its password is to change, or no other connection can log in
		// as its account: the session keeps this one.
		s.mux.pins |= pinAccount
	}
	s.mux.show(s.srv.pool.bounds.m.pinned, s.be, s.status)
	if s.mux.on && s.mux.giveBack(s.srv.pool, s.be, s.reading.db, s.status) {
		s.be = nil
		s.pub.lend(nil)
	}
}

// dispatchLent is dispatch with a primary connection lent for the
// command when the session multiplexes and holds none.
func (s *session) dispatchLent(p []byte) error {
	if !s.mux.on {
		return s.dispatch(p)
	}
	s.mux.fresh = false
	// A close has no answer and, between loans, nothing to close on a
	// connection: it borrows none (closeStmt).
	if s.be == nil && p[0] != mysql.COM_QUIT && p[0] != mysql.COM_STMT_CLOSE {
		be, err := s.mux.borrow(s.hardCtx, s.srv, s.reading.db)
		if err != nil {
			return s.writeErrAt(1, err)
		}
		s.be = be
		s.pub.lend(be)
		s.mux.fresh = true
		s.mux.loan++
	}
	// The command byte is read here once: p is the reader's buffer, which
	// a command that reads more packets (LOAD DATA LOCAL's file) reuses
	// or replaces before dispatch returns.
	cmd := p[0]
	stmtCommand := false
	switch cmd {
	case mysql.COM_SET_OPTION:
		s.mux.pins |= pinSessionVariable
	case mysql.COM_STMT_PREPARE, mysql.COM_STMT_EXECUTE, comStmtBulkExecute, mysql.COM_STMT_FETCH,
		mysql.COM_STMT_RESET, mysql.COM_STMT_SEND_LONG_DATA, mysql.COM_STMT_CLOSE:
		// Prepared statements (pool_stmt.go).
		stmtCommand = true
	}
	s.mux.warned, s.mux.cmdPins, s.mux.readsDiagnostics, s.mux.unlocks = false, 0, false, false
	s.mux.keepsDiag = keepsDiagnosticsIfOK(cmd) // a statement's are pinFor's
	s.mux.known = nil
	s.mux.pending = s.mux.pending[:0]
	clear(s.mux.replaying)
	errs := s.errsWritten
	if err := s.dispatch(p); err != nil {
		return err
	}
	if len(s.mux.pending) > 0 {
		if s.ex.lastOK && s.errsWritten == errs {
			if s.mux.replaying["wait_timeout"] && !s.ex.waitReported {
				// The server's report did not name it (SET
				// @@wait_timeout = 1 comes without one): the session's
				// idle limit is asked for before it gives the
				// connection back.
				s.mux.askIdle = true
			}
			s.mux.keepPending()
		} else {
			// Some of the text may have run: the connection holds what
			// the session cannot be sure to replay.
			s.mux.pins |= pinSessionVariable
		}
	}
	switch {
	case cmd == mysql.COM_RESET_CONNECTION && s.ex.lastOK:
		// The server forgot the session's state, but not a change of
		// its account (pinAccount).
		s.mux.pins, s.mux.changed, s.mux.sets = s.mux.pins&pinAccount, true, nil
		s.mux.setsGen++
		s.mux.idle, s.mux.askIdle = s.be.waitTimeout, false // read again with the reset's tracking
	case cmd == mysql.COM_QUERY && s.mux.unlocks && s.ex.lastOK && s.mux.cmdPins&pinLockTables == 0:
		s.mux.pins &^= pinLockTables
	}
	if s.ex.waitReported {
		s.mux.idle, s.ex.waitReported, s.mux.askIdle = s.ex.waitTimeout, false, false
	}
	if stmtCommand || cmd == mysql.COM_RESET_CONNECTION || cmd == mysql.COM_CHANGE_USER {
		s.mux.held = s.prep.holding()
	}
	answers := cmd == mysql.COM_QUERY || cmd == mysql.COM_INIT_DB || cmd == mysql.COM_STMT_PREPARE ||
		cmd == mysql.COM_STMT_EXECUTE || cmd == comStmtBulkExecute
	if answers && !s.mux.readsDiagnostics {
		// The diagnostics area holds the warnings and errors of the
		// last statement that cleared it: one that names a table or
		// raises a condition (keepsReplicaDiagnostics).
		left := s.mux.warned || !s.ex.lastOK || s.errsWritten != errs
		if s.route.readNow {
			s.route.replicaLeft = left || s.route.replicaLeft && s.route.readKept
		}
		if !(s.mux.keepsDiag && s.ex.lastOK && !s.ex.raised) || s.route.readNow {
			s.mux.pins &^= pinDiagnostics
		}
		if left && !s.route.diagReplica {
			s.mux.pins |= pinDiagnostics // SHOW WARNINGS must find them
		}
	}
	if s.mux.askIdle && s.mux.mayGiveBack(s.be, s.reading.db, s.status) {
		if v, err := s.be.queryValue("SELECT @@session.wait_timeout"); err == nil {
			s.mux.idle = seconds(v)
		}
		s.mux.askIdle = false
	}
	if s.mux.giveBack(s.srv.pool, s.be, s.reading.db, s.status) {
		s.be = nil
		s.pub.lend(nil)
	}
	s.route.settleReplica(s.srv.pool, s.be != nil)
	s.mux.show(s.srv.pool.bounds.m.pinned, s.be, s.status)
	return nil
}

// borrow lends the session a primary connection of its login, in its
// current database db; ctx ends when lockproxy stops for good.
func (m *muxState) borrow(ctx context.Context, srv *Server, db string) (*backendConn, error) {
	wait := srv.config().Backends.Pool.WaitTimeout.D()
	be, err := srv.pool.lend(ctx, m.key, wait+dialTimeout) // the login was judged (pinBackend)
	if err != nil {
		if !errors.Is(err, errPoolExhausted) {
			srv.metrics.backendErrors.WithLabelValues("primary").Inc()
		}
		return nil, backendDialError(err)
	}
	if db != be.key.db {
		be.dbDirty = true
		if err := be.simpleCommand(append([]byte{mysql.COM_INIT_DB}, db...)); err != nil {
			srv.pool.put(be)
			return nil, err
		}
	}
	if err := m.replaySets(be); err != nil {
		srv.pool.put(be) // reset in the background, or dropped when broken
		return nil, err
	}
	return be, nil
}

// giveBack gives be, the lent connection, back to p when nothing ties
// the session to it (the server's last status, the session's database
// db) and reports whether it did.
func (m *muxState) giveBack(p *pool, be *backendConn, db string, status uint16) bool {
	if be == nil || be.broken || statusPins(status)|m.pins|m.held != 0 || len(be.pre) > 0 {
		return false
	}
	if db == "" && be.key.db != "" {
		// No command takes a connection out of its database: keep this
		// one, which has none.
		m.pins |= pinUnknown
		return false
	}
	clean := !m.changed && !be.dbDirty && !be.optionSet
	m.changed = false
	if clean {
		p.keep(be)
	} else {
		p.put(be) // reset in the background
	}
	return true
}

// mayGiveBack reports whether giveBack would give be back.
func (m *muxState) mayGiveBack(be *backendConn, db string, status uint16) bool {
	return be != nil && !be.broken && statusPins(status)|m.pins|m.held == 0 && len(be.pre) == 0 &&
		!(db == "" && be.key.db != "")
}

// show brings the gauge g (lockproxy_sessions_pinned) up to date with
// the session's reasons: its own and, while it holds be, those of the
// server's status.
func (m *muxState) show(g *prometheus.GaugeVec, be *backendConn, status uint16) {
	now := m.pins | m.held
	if m.on && be != nil {
		now |= statusPins(status)
	}
	if now == m.shown {
		return
	}
	for _, r := range pinReasons {
		switch {
		case now&r.bit != 0 && m.shown&r.bit == 0:
			g.WithLabelValues(r.name).Inc()
		case now&r.bit == 0 && m.shown&r.bit != 0:
			g.WithLabelValues(r.name).Dec()
		}
	}
	m.shown = now
}

// idleLimit is how long the session may wait for its next command: its
// wait_timeout while it holds no primary connection (MariaDB ends an
// idle connection after it, and a pool's liveness check expects so),
// else 0 (the connection it holds ends it: gone.go).
func (m *muxState) idleLimit(be *backendConn) time.Duration {
	if !m.on || be != nil {
		return 0
	}
	return m.idle
}

// seconds reads a value in seconds MariaDB reported (wait_timeout); 0
// when it is not one.
func seconds[T string | []byte](v T) time.Duration {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f <= 0 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// end takes the ending session out of lockproxy_sessions_pinned (g).
func (m *muxState) end(g *prometheus.GaugeVec) {
	m.pins, m.held, m.on = 0, 0, false
	m.show(g, nil, 0)
}
