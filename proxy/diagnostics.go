package proxy

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
)

// The diagnostics area. MariaDB keeps the warnings and errors of a
// session's last statement for SHOW WARNINGS, SHOW ERRORS and
// @@warning_count/@@error_count. A read a replica served left them on the
// session's replica connection, not on the primary: the statements that
// read them go where the previous statement ran.

// keepsDiagnostics reports whether MariaDB leaves the diagnostics area of
// the previous statement as it was across a command: those that run no
// statement.
func keepsDiagnostics(cmd byte) bool {
	switch cmd {
	case mysql.COM_PING, mysql.COM_STATISTICS, mysql.COM_STMT_CLOSE, mysql.COM_STMT_SEND_LONG_DATA:
		return true
	}
	return false
}

// keepsDiagnosticsIfOK reports whether MariaDB leaves the diagnostics
// area of the previous statement as it was across a command that
// succeeds (TestKeepsDiagnosticsOracle): COM_INIT_DB, COM_FIELD_LIST and
// COM_SET_OPTION. One that fails leaves its error there.
func keepsDiagnosticsIfOK(cmd byte) bool {
	switch cmd {
	case mysql.COM_INIT_DB, mysql.COM_FIELD_LIST, mysql.COM_SET_OPTION:
		return true
	}
	return false
}

// beginCommand notes, before a command is served, whether the diagnostics
// area the client may read is the replica connection's (diagPrev); the
// command, unless it keeps them, then owns the session's diagnostics
// wherever it runs (onReplica marks a replica's). One that keeps them
// unless it fails gives them up in endKeepingCommand.
func (r *routeState) beginCommand(cmd byte) {
	r.diagPrev, r.readNow = r.diagReplica, false
	r.lostPrev = r.diagLost
	if !keepsDiagnostics(cmd) && !keepsDiagnosticsIfOK(cmd) {
		r.diagReplica, r.diagLost = false, false
	}
}

// endKeepingCommand is told whether a command of keepsDiagnosticsIfOK
// succeeded: if not, its error on the primary is the session's
// diagnostics.
func (r *routeState) endKeepingCommand(ok bool) {
	if !ok {
		r.diagReplica, r.diagLost = false, false
	}
}

// diagnosticsOnly reports whether every statement of an only reads the
// diagnostics area (parser.Facts.Diagnostics).
func diagnosticsOnly(an *parser.Analysis) bool {
	if an != nil && an.Unparsed {
		return parser.ShowDiagnostics(an.SQL, an.Mode)
	}
	if an == nil || len(an.Stmts) == 0 {
		return false
	}
	for _, f := range an.Stmts {
		if !f.Diagnostics {
			return false
		}
	}
	return true
}

// diagnosticsOnReplica serves the statement on the replica connection
// that ran the previous one when it only reads the diagnostics area, and
// reports whether it did; false means the diagnostics are the primary's
// and the statement goes there. Should that connection fail before answering, the warnings it
// held are gone: the client is told so (1105), never shown the primary's.
func (x *statementRun) diagnosticsOnReplica() (served bool, err error) {
	s := x.s
	rc := s.route.replica.conn
	if !s.route.diagPrev || rc == nil || !diagnosticsOnly(x.r.an) {
		return false, nil
	}
	p := x.r.p
	if x.r.st != nil {
		p, err = s.route.replicaExecute(rc, p, x.r.st)
	}
	if err == nil {
		err = x.relayReplicaIf(rc, p, x.r.st != nil, nil)
		if _, ok := err.(clientIOError); ok || err != nil && s.ex.midResponse {
			rc.broken = true
			return true, err
		}
	}
	if err != nil {
		// The connection failed before answering: the client is told its
		// warnings and errors are lost.
		s.route.replicaBroken(s.srv, s.log, rc.key.addr, err)
		return true, s.writeErrAt(1, errorf(errDiagnosticsLost,
			"the replica connection that ran the previous statement failed; its warnings and errors are lost (%v)", err))
	}
	s.route.diagReplica = true
	s.srv.metrics.queries.WithLabelValues("replica", kindLabel(x.r.st)).Inc()
	return true, nil
}

// diagnosticsElsewhere refuses a command that may read the diagnostics
// area but must run on the primary (GET DIAGNOSTICS, which sets
// variables; SELECT @@warning_count INTO @w; @@error_count in an
// expression; such a statement run by EXECUTE; dynamic SQL lockproxy
// cannot see: plan.readsDiag) while that area is the replica
// connection's, where the previous statement, a read, ran: the primary's
// would answer for another statement. Those that only read it are
// served there (diagnosticsOnReplica).
func (x *statementRun) diagnosticsElsewhere() error {
	s := x.s
	if s.route.lostPrev && (diagnosticsOnly(x.r.an) || x.pl.readsDiag) {
		return errorf(errDiagnosticsLost, "the warnings of the previous statement are lost: its rewrite read the row back "+
			"on the same connection after the UPDATE changed nothing (rewrite's check), which replaced them")
	}
	if !s.route.diagPrev || s.route.replica.conn == nil || diagnosticsOnly(x.r.an) || !x.pl.readsDiag {
		return nil
	}
	return errorf(errStateElsewhere, "this statement reads the warnings and errors of the previous statement, a read a replica served, "+
		"but it runs on the primary: read them with SHOW WARNINGS, SHOW ERRORS or a SELECT of nothing but @@warning_count and @@error_count, "+
		"or run the read on the primary (/* lockproxy:primary */, or in a transaction)")
}

// keepsReplicaDiagnostics reports whether a statement the primary ran
// surely leaves the client's diagnostics area as the previous statement,
// which a replica ran, left it (diagnosticsEffect). One whose effect
// lockproxy cannot tell is taken to clear it, as most such statements do
// (a CALL or EXECUTE running statements on tables).
func keepsReplicaDiagnostics(an *parser.Analysis, ok, raised bool) bool {
	return diagnosticsEffect(an, ok, raised) == diagKeeps
}

// diagEffect is what a statement does to the diagnostics area the
// statement before it left.
type diagEffect int

const (
	diagClears  diagEffect = iota // it holds this statement's conditions, or none
	diagKeeps                     // as the statement before left it
	diagUnknown                   // either, by what runs inside (CALL, EXECUTE, PREPARE, a stored function)
)

// diagnosticsEffect tells what a statement that succeeded (ok) with or
// without raising warnings does to the diagnostics area. MariaDB clears
// it for a statement that names a table (a view, a derived table or CTE,
// an information_schema table behind SHOW) or raises a condition, and
// leaves it for one that does neither: SET @x = 1, SELECT @@last_insert_id,
// BEGIN, COMMIT, ROLLBACK, the savepoints, USE, DO 0, EXPLAIN SELECT 1,
// UNLOCK TABLES, DEALLOCATE, FLUSH STATUS, HELP. A PREPARE clears it when
// the statement it prepares names a table.
// TestKeepsDiagnosticsOracle asks MariaDB for each kind.
func diagnosticsEffect(an *parser.Analysis, ok, raised bool) diagEffect {
	if !ok || raised {
		return diagClears
	}
	if an == nil || an.Unparsed || len(an.Stmts) == 0 {
		return diagUnknown
	}
	eff := diagKeeps
	for _, f := range an.Stmts {
		switch {
		case len(f.Tables) > 0 || f.Derived:
			return diagClears // and the statements after it keep that
		case f.Procedure != "", f.Kind == parser.KindExecute,
			f.Impure != "" && !strings.HasPrefix(f.Impure, "reads @@"),
			!keepsDiagnosticsKind[f.Kind] && !(f.Kind == parser.KindOther && keepsDiagnosticsWord[leadingWord(f.Text)]):
			eff = diagUnknown
		}
	}
	return eff
}

// keepsDiagnosticsKind are the kinds of statement that leave the
// diagnostics area as it was when they name no table, call nothing and
// raise nothing; keepsDiagnosticsWord, by their first word, those of
// the statements the parser calls KindOther.
var (
	keepsDiagnosticsKind = map[parser.Kind]bool{
		parser.KindSet: true, parser.KindSelect: true, parser.KindBegin: true, parser.KindCommit: true,
		parser.KindRollback: true, parser.KindSavepoint: true, parser.KindReleaseSavepoint: true,
		parser.KindRollbackToSavepoint: true, parser.KindUse: true, parser.KindExplain: true,
		parser.KindUnlockTables: true, parser.KindDeallocate: true,
	}
	keepsDiagnosticsWord = map[string]bool{"DO": true, "FLUSH": true, "HELP": true}
)

// leadingWord is text's first word, upper-cased.
func leadingWord(text string) string {
	i := 0
	for i < len(text) && (text[i]|0x20 >= 'a' && text[i]|0x20 <= 'z' || text[i] == '_') {
		i++
	}
	return strings.ToUpper(text[:i])
}
