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
	// max_execution_time, SELECT only).
	erStatementTimeout = 1969
	erQueryTimeout     = 3024
)

// unavailableCodes are server errors that mean "cannot serve now":
// too many connections, shutdown in progress, read-only (a demoted
// primary), connection killed, server shutdown, and a statement the
// server's own time limit cut (the server did not answer in time).
var unavailableCodes = map[uint16]bool{1040: true, 1053: true, 1290: true, 1836: true, 1927: true, 4031: true,
	erStatementTimeout: true, erQueryTimeout: true}

// retryable reports an InnoDB lock wait timeout or deadlock between lock
// statements, or a statement the server's time limit cut (a DBA's
// max_statement_time shorter than innodb_lock_wait_timeout ends a wait
// for a row lock that way): the try is simply repeated.
func retryable(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erLockWaitTimeout, erLockDeadlock, erStatementTimeout, erQueryTimeout:
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
