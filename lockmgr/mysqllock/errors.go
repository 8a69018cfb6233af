package mysqllock

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Server error numbers the store tells apart.
const (
	erDupEntry        = 1062
	erNoSuchTable     = 1146
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
	// erStatementTimeout and erQueryTimeout: a statement the server cut
	// at its own time limit (MariaDB's max_statement_time, MySQL's
	// max_execution_time, SELECT only); erQueryInterrupted: one a KILL
	// QUERY ended (an operator's, or a query killer's such as pt-kill).
	erStatementTimeout = 1969
	erQueryTimeout     = 3024
	erQueryInterrupted = 1317
)

// unavailableCodes are server errors that mean "cannot serve now":
// too many connections (1040; 1203 past max_user_connections; 1226 past
// the account's own MAX_USER_CONNECTIONS or hourly limits), shutdown in progress,
// read-only (a demoted primary), connection killed, server shutdown,
// and a statement the server cut (it did not answer in time).
var unavailableCodes = map[uint16]bool{1040: true, 1203: true, 1226: true, 1053: true, 1290: true,
	1836: true, 1927: true, 4031: true, erStatementTimeout: true, erQueryTimeout: true, erQueryInterrupted: true}

// retryable reports an InnoDB lock wait timeout or deadlock between lock
// statements, or a statement the server cut (a DBA's max_statement_time
// shorter than innodb_lock_wait_timeout, or a query killer, ends a wait
// for a row lock that way): the try is simply repeated. Each lock
// statement is its own transaction, so a cut one changed nothing.
func retryable(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erLockWaitTimeout, erLockDeadlock, erStatementTimeout, erQueryTimeout, erQueryInterrupted:
		return true
	}
	return false
}

func duplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erDupEntry
}

func unavailable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return unavailableCodes[me.Number]
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "sql: database is closed")
}

// wrap names what failed and marks unreachable-server errors with
// lockmgr.ErrUnavailable.
func (s *store) wrap(what string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("%w: mysqllock: %s on %s: %w", lockmgr.ErrUnavailable, what, s.tn.quoted(""), err)
	}
	return fmt.Errorf("mysqllock: %s on %s: %w", what, s.tn.quoted(""), err)
}
