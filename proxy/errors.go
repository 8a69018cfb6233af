package proxy

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	perrors "github.com/pingcap/errors"
)

// MySQL error codes lockproxy writes itself.
const (
	erConCount        = 1040 // ER_CON_COUNT_ERROR
	erUserConCount    = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	erServerShutdown  = 1053 // ER_SERVER_SHUTDOWN
	erNoSuchThread    = 1094 // ER_NO_SUCH_THREAD
	erAccessDenied    = 1045 // ER_ACCESS_DENIED_ERROR
	erUnknownCom      = 1047 // ER_UNKNOWN_COM_ERROR
	erUnknown         = 1105 // ER_UNKNOWN_ERROR
	erNetPacketTooBig = 1153 // ER_NET_PACKET_TOO_LARGE
	erHandshake       = 1043 // ER_HANDSHAKE_ERROR
	erUnknownStmt     = 1243 // ER_UNKNOWN_STMT_HANDLER
	erWrongArguments  = 1210 // ER_WRONG_ARGUMENTS
	erLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	erLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
	erOutOfResources  = 1041 // ER_OUT_OF_RESOURCES
	erHostBlocked     = 1129 // ER_HOST_IS_BLOCKED
	erAuthMode        = 1251 // ER_NOT_SUPPORTED_AUTH_MODE
	erParse           = 1064 // ER_PARSE_ERROR
	erSpecificAccess  = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	erMalformedPacket = 1835 // ER_MALFORMED_PACKET
	erTooDeepNesting  = 1473 // ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT
	// erMaxPreparedStmts: the server's max_prepared_stmt_count is reached.
	erMaxPreparedStmts = 1461 // ER_MAX_PREPARED_STMT_COUNT_REACHED
	// erMustChangePassword: the session's password expired and MariaDB
	// runs only SET until it is changed (its sandbox).
	erMustChangePassword = 1820 // ER_MUST_CHANGE_PASSWORD
	// erConstraintFailed is MariaDB's CHECK-constraint error, SQLSTATE
	// 23000: a guarded UPDATE that would take its column below min.
	erConstraintFailed = 4025 // ER_CONSTRAINT_FAILED
	// erConnHost is the client library's "cannot connect" code: the
	// primary could not be reached for a login.
	erConnHost = 2003 // CR_CONN_HOST_ERROR
)

// sqlError is an error that reaches the client as a MySQL error packet.
// Errors lockproxy makes itself carry a message beginning "lockproxy: ";
// errors that came from a backend keep its code, SQLSTATE and message.
type sqlError struct {
	Code  uint16
	State string
	Msg   string
}

func (e *sqlError) Error() string { return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Msg) }

// newSQLError makes an error of lockproxy's own with the code and SQLSTATE
// given, for a caller that writes the packet itself. Prefer returning a
// sentinel of clientErrors and letting toSQLError decide.
func newSQLError(code uint16, state, format string, args ...any) *sqlError {
	return &sqlError{Code: code, State: state, Msg: "lockproxy: " + fmt.Sprintf(format, args...)}
}

// toSQLError is the one place where any error becomes what the client sees.
// An error with a row in clientErrors gets that row's code and SQLSTATE
// (the sentinel decides, even over a lock service's own MySQL error deeper
// in the chain); backend errors pass through untouched; anything else
// becomes 1105. The message of lockproxy's own errors begins "lockproxy: ".
func toSQLError(err error) *sqlError {
	if row, ok := clientErrorOf(err); ok {
		text := err.Error()
		if row.text != nil {
			text = row.text(err)
		}
		return &sqlError{Code: row.code, State: row.state, Msg: "lockproxy: " + text}
	}
	if se, ok := asIs(err); ok {
		return se
	}
	return &sqlError{Code: erUnknown, State: "HY000", Msg: "lockproxy: " + err.Error()}
}

// asIs finds in err's chain an error that reaches the client as it is: a
// backend's error packet (also as go-mysql's *mysql.MyError), or an
// answer lockproxy has already made.
func asIs(err error) (*sqlError, bool) {
	var se *sqlError
	if errors.As(err, &se) {
		return se, true
	}
	var me *mysql.MyError
	if errors.As(err, &me) || errors.As(perrors.Cause(err), &me) {
		return &sqlError{Code: me.Code, State: me.State, Msg: me.Message}, true
	}
	return nil, false
}

// errPayload encodes e as an ERR packet payload (protocol 4.1).
func errPayload(e *sqlError) []byte {
	state := e.State
	if len(state) != 5 {
		state = "HY000"
	}
	b := make([]byte, 0, 9+len(e.Msg))
	b = append(b, 0xff, byte(e.Code), byte(e.Code>>8), '#')
	b = append(b, state...)
	return append(b, e.Msg...)
}

// parseErrPayload decodes an ERR packet payload from a backend.
func parseErrPayload(p []byte) *sqlError {
	if len(p) < 3 || p[0] != 0xff {
		return newSQLError(erUnknown, "HY000", "malformed error packet from backend")
	}
	e := &sqlError{Code: uint16(p[1]) | uint16(p[2])<<8, State: "HY000"}
	rest := p[3:]
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Msg = string(rest)
	return e
}
