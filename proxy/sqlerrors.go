package proxy

import (
	"errors"
	"fmt"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Sentinel errors lockproxy answers clients with. Each has a row in
// clientErrors, which gives its MySQL code and SQLSTATE. Make one with
// errorf, which adds the words the client reads, or wrap one with %w.
var (
	// errTooManyConnections: proxy.max_connections sessions are logged
	// in, or the server is draining (1040).
	errTooManyConnections = errors.New("proxy: too many connections")
	// errTooManyUserConnections: the user has users[].max_connections
	// sessions logged in (1203).
	errTooManyUserConnections = errors.New("proxy: too many connections for the user")
	// errAccessDenied: the login is refused: a wrong password, an unknown
	// user, or a client without TLS where proxy.require_tls (1045).
	errAccessDenied = errors.New("proxy: access denied")
	// errAuthMode: the account, read from the primary
	// (users.from_backend), logs in with a plugin other than
	// mysql_native_password, or with several, which lockproxy cannot
	// verify nor log in with (1251).
	errAuthMode = errors.New("proxy: authentication plugin not served")
	// errHostBlocked: too many failed logins from the host are waiting
	// their turn (1129).
	errHostBlocked = errors.New("proxy: host blocked after failed logins")
	// errBadCommand: an empty, malformed or unsupported command (1047).
	errBadCommand = errors.New("proxy: bad command")
	// errShutdown: the server is draining and the session is outside a
	// transaction (1053).
	errShutdown = errors.New("proxy: server shutdown in progress")
	// errStatementTooLong: the text is longer than
	// proxy.max_statement_size (1105: a limit of lockproxy's, not a syntax error).
	errStatementTooLong = errors.New("proxy: statement too long to analyse")
	// errSyntax: a statement lockproxy answers itself is malformed (1064).
	errSyntax = errors.New("proxy: syntax error")
	// errNeedProcess: a statement lockproxy answers itself shows what
	// other users' sessions ran, which needs the PROCESS privilege (1227).
	errNeedProcess = errors.New("proxy: PROCESS privilege needed")
	// errTooDeepNesting: parentheses nest deeper than proxy.max_nesting
	// (1473).
	errTooDeepNesting = errors.New("proxy: nesting too deep to analyse")
	// errOutOfMemory: serving the command would take a memory budget
	// over proxy.session_memory or proxy.memory_budget (1041).
	errOutOfMemory = errors.New("proxy: out of memory")
	// errWrongArguments: a COM_STMT_EXECUTE too short to read, or whose
	// parameter types cannot be bound (1210).
	errWrongArguments = errors.New("proxy: incorrect arguments to mysqld_stmt_execute")
	// errUnknownStmt: a prepared statement id the session does not
	// know (1243).
	errUnknownStmt = errors.New("proxy: unknown prepared statement")
	// errUnknownThread: KILL names a connection id lockproxy does not
	// know (1094).
	errUnknownThread = errors.New("proxy: unknown thread id")
	// errKillIdle: KILL of another user's session that holds no backend
	// connection (multiplexing), which MariaDB cannot check (1105).
	errKillIdle = errors.New("proxy: cannot check a KILL of another user's idle session")
	// errRejected: a rule refuses the statement: its keys cannot be
	// derived, it may write a table through objects lockproxy cannot
	// lock, or it is an unpaired write under rewrite.on_unpaired: reject
	// (1105).
	errRejected = errors.New("proxy: statement refused by its rule")
	// errRaceLost: a guarded UPDATE changed no row because the guarded
	// column changed after it was read; the transaction is rolled back
	// (1213).
	errRaceLost = errors.New("proxy: guarded update lost its race")
	// errConstraint: a guarded UPDATE would take its column below the
	// rule's min, so it changed no row (4025).
	errConstraint = errors.New("proxy: guarded update would break its minimum")
	// errPrimaryUnreachable: no connection to the primary could be
	// opened, and the primary sent no error of its own (2003).
	errPrimaryUnreachable = errors.New("proxy: cannot connect to the primary")
	// errReplicaUnreachable: KILL could not reach the replica running the
	// query it is to stop (2003).
	errReplicaUnreachable = errors.New("proxy: cannot reach the replica")
	// errDiagnosticsLost: the replica connection that ran the previous
	// statement failed before it gave that statement's warnings (1105).
	errDiagnosticsLost = errors.New("proxy: the previous statement's diagnostics are lost")
)

// clientError is one row of clientErrors: an error that matches err
// (errors.Is) reaches the client as code and state. Its message is
// "lockproxy: " and text(err), or the error's own text when text is nil.
type clientError struct {
	err   error
	code  uint16
	state string
	text  func(error) string
}

// clientErrors maps every error of lockproxy's packages that reaches a
// client to what the client sees; toSQLError consults it, and
// TestEveryErrorMapped fails when a sentinel that can reach a client has
// no row. The first matching row wins: lockproxy's own sentinels come
// first, as the call site that chose one knows best.
var clientErrors = []clientError{
	{err: errTooManyConnections, code: erConCount, state: "08004"},
	{err: errTooManyUserConnections, code: erUserConCount, state: "42000"},
	{err: errAccessDenied, code: erAccessDenied, state: "28000"},
	{err: errAuthMode, code: erAuthMode, state: "08004"},
	{err: errHostBlocked, code: erHostBlocked, state: "HY000"},
	{err: errHandshake, code: erHandshake, state: "08S01"},
	{err: errBadCommand, code: erUnknownCom, state: "08S01"},
	{err: errShutdown, code: erServerShutdown, state: "08S01"},
	{err: errPacketTooLarge, code: erNetPacketTooBig, state: "08S01",
		text: func(error) string { return "got a packet bigger than 'max_allowed_packet' bytes" }},
	{err: errStatementTooLong, code: erUnknown, state: "HY000"},
	{err: errSyntax, code: erParse, state: "42000"},
	{err: errNeedProcess, code: erSpecificAccess, state: "42000"},
	{err: errTooDeepNesting, code: erTooDeepNesting, state: "HY000"},
	{err: errOutOfMemory, code: erOutOfResources, state: "HY000"},
	{err: errWrongArguments, code: erWrongArguments, state: "HY000"},
	{err: errBadParams, code: erUnknown, state: "HY000"},
	{err: errNoParamTypes, code: erMalformedPacket, state: "HY000"},
	{err: errUnknownStmt, code: erUnknownStmt, state: "HY000"},
	{err: errUnknownThread, code: erNoSuchThread, state: "HY000"},
	{err: errKillIdle, code: erUnknown, state: "HY000"},
	{err: errRejected, code: erUnknown, state: "HY000"},
	{err: errRaceLost, code: erLockDeadlock, state: "40001"},
	{err: errConstraint, code: erConstraintFailed, state: "23000"},
	{err: errPrimaryUnreachable, code: erConnHost, state: "HY000"},
	{err: errReplicaUnreachable, code: erConnHost, state: "HY000"},
	{err: errDiagnosticsLost, code: erUnknown, state: "HY000"},
	{err: errPoolExhausted, code: erUnknown, state: "HY000"},
	{err: errStateElsewhere, code: erUnknown, state: "HY000"},

	{err: lockmgr.ErrWaitTimeout, code: erLockWaitTimeout, state: "HY000",
		text: mysqlWords("Lock wait timeout exceeded; try restarting transaction")},
	{err: lockmgr.ErrDeadlock, code: erLockDeadlock, state: "40001",
		text: mysqlWords("Deadlock found when trying to get lock; try restarting transaction")},
	{err: lockmgr.ErrLeaseLost, code: erLockDeadlock, state: "40001",
		text: mysqlWords("Deadlock found when trying to get lock; try restarting transaction")},
	{err: lockmgr.ErrUnavailable, code: erUnknown, state: "HY000"},
	{err: lockmgr.ErrClosed, code: erUnknown, state: "HY000"},
	{err: lockmgr.ErrInvalidKey, code: erUnknown, state: "HY000"},
}

// mysqlWords renders an error as MariaDB's own message for its code, with
// lockproxy's account (rule, key, cause) in parentheses, so clients that
// match MariaDB's words still recognise it.
func mysqlWords(words string) func(error) string {
	return func(err error) string { return words + " (" + err.Error() + ")" }
}

// clientErrorOf is the row of clientErrors that err matches.
func clientErrorOf(err error) (clientError, bool) {
	for _, row := range clientErrors {
		if errors.Is(err, row.err) {
			return row, true
		}
	}
	return clientError{}, false
}

// kindError is an error of a sentinel kind with the words the client
// reads: the kind picks the row of clientErrors, the words are the
// message after "lockproxy: ".
type kindError struct {
	kind error
	said error
}

func (e *kindError) Error() string   { return e.said.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.said} }

// errorf returns an error of kind whose message is format and args, as
// fmt.Errorf makes it (%w wraps a cause). The message names what the
// client must know, the rule and key among them where there is one; the
// boundary adds "lockproxy: ".
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, said: fmt.Errorf(format, args...)}
}
