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
	erParse           = 1064 // ER_PARSE_ERROR
	erTooDeepNesting  = 1473 // ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT
	// erConstraintFailed is MariaDB's CHECK-constraint error, SQLSTATE
	// 23000: a guarded UPDATE that would take its column below min.
	erConstraintFailed = 4025 // ER_CONSTRAINT_FAILED
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

// newSQLError makes an error of lockproxy's own.
func newSQLError(code uint16, state, format string, args ...any) *sqlError {
	return &sqlError{Code: code, State: state, Msg: "lockproxy: " + fmt.Sprintf(format, args...)}
}

// toSQLError is the one place where any error becomes what the client sees.
// Backend errors pass through untouched; everything else becomes 1105 with a
// message of lockproxy's own.
func toSQLError(err error) *sqlError {
	var se *sqlError
	if errors.As(err, &se) {
		return se
	}
	var me *mysql.MyError
	if errors.As(err, &me) || errors.As(perrors.Cause(err), &me) {
		return &sqlError{Code: me.Code, State: me.State, Msg: me.Message}
	}
	if errors.Is(err, errPacketTooLarge) {
		return newSQLError(erNetPacketTooBig, "08S01", "got a packet bigger than 'max_allowed_packet' bytes")
	}
	return newSQLError(erUnknown, "HY000", "%v", err)
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
