package workload

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Tally counts what the clients did. Safe for concurrent use.
type Tally struct {
	mu       sync.Mutex
	stmts    map[string]int64  // successful statements (or operations) by kind
	errs     map[string]int64  // errors by code
	firstMsg map[string]string // the first message seen per error code
	// Increments of the rewrite table the clients saw succeed (1 row
	// changed); the table's total must equal it.
	increments atomic.Int64
	// Releases slower than ReleaseBound (or never) after an abandoned
	// transaction, and the slowest one seen.
	slowReleases atomic.Int64
	maxRelease   atomic.Int64 // nanoseconds
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{stmts: map[string]int64{}, errs: map[string]int64{}, firstMsg: map[string]string{}}
}

// Add counts n successful statements of kind.
func (t *Tally) Add(kind string, n int64) {
	t.mu.Lock()
	t.stmts[kind] += n
	t.mu.Unlock()
}

// Fail counts err by its code (see ErrCode), keeping the first message of
// each code.
func (t *Tally) Fail(err error) {
	code := ErrCode(err)
	t.mu.Lock()
	t.errs[code]++
	if _, ok := t.firstMsg[code]; !ok {
		t.firstMsg[code] = err.Error()
	}
	t.mu.Unlock()
}

// Snapshot returns copies of the counts: statements by kind, errors by
// code and the first message of each code.
func (t *Tally) Snapshot() (stmts, errs map[string]int64, msgs map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stmts, errs, msgs = map[string]int64{}, map[string]int64{}, map[string]string{}
	for k, v := range t.stmts {
		stmts[k] = v
	}
	for k, v := range t.errs {
		errs[k] = v
	}
	for k, v := range t.firstMsg {
		msgs[k] = v
	}
	return stmts, errs, msgs
}

// CountIncrement counts one increment of the rewrite table that a client
// saw succeed (its UPDATE changed the row).
func (t *Tally) CountIncrement() { t.increments.Add(1) }

// Increments is how many increments of the rewrite table the clients saw
// succeed; the table's total must equal it.
func (t *Tally) Increments() int64 { return t.increments.Load() }

// SlowReleases is how many abandoned locks were not free within
// ReleaseBound (or never).
func (t *Tally) SlowReleases() int64 { return t.slowReleases.Load() }

// MaxRelease is the longest an abandoned lock took to become free.
func (t *Tally) MaxRelease() time.Duration { return time.Duration(t.maxRelease.Load()) }

// release records how long an abandoned lock took to become free.
func (t *Tally) release(took time.Duration) {
	if took > ReleaseBound {
		t.slowReleases.Add(1)
	}
	for {
		old := t.maxRelease.Load()
		if int64(took) <= old || t.maxRelease.CompareAndSwap(old, int64(took)) {
			break
		}
	}
}

// ExpectedErrors are the codes a client is told to retry under contention:
// lock wait timeout and deadlock (lockproxy's or InnoDB's).
var ExpectedErrors = map[string]bool{"1205": true, "1213": true}

// ErrCode names an error for counting: the MySQL error number, or a short
// class for driver and network failures ("bad-connection", "timeout",
// "network"), "check" for a wrong answer, else "other".
func ErrCode(err error) string {
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &me):
		return strconv.Itoa(int(me.Number))
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn):
		return "bad-connection"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne):
		return "network"
	case errors.Is(err, errCheck):
		return "check"
	default:
		return "other"
	}
}

// errCheck marks a wrong answer: a short result, a login that should have
// failed, a value that cannot be.
var errCheck = errors.New("soak: wrong answer")

// Unexpected sums the errors whose codes are not in ExpectedErrors.
func Unexpected(errs map[string]int64) int64 {
	var n int64
	for code, c := range errs {
		if !ExpectedErrors[code] {
			n += c
		}
	}
	return n
}
