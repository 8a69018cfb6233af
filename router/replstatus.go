package router

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// replicaStatus is what a check reads from one row of SHOW SLAVE STATUS
// (MariaDB, MySQL before 8.0.22) or SHOW REPLICA STATUS (MySQL 8.0.22+,
// whose columns say Replica_ and _Source instead of Slave_ and _Master).
type replicaStatus struct {
	present    bool // the statement returned a row
	ioRunning  string
	sqlRunning string
	lag        sql.NullString // Seconds_Behind_Master; NULL when unknown
	ioError    string
	sqlError   string
}

// statusColumns maps each field to the column names that may carry it.
var statusColumns = map[string][]string{
	"io":    {"slave_io_running", "replica_io_running"},
	"sql":   {"slave_sql_running", "replica_sql_running"},
	"lag":   {"seconds_behind_master", "seconds_behind_source"},
	"ioerr": {"last_io_error"},
	"sqerr": {"last_sql_error"},
}

// parseReplicaStatus reads the fields it needs from one row given as column
// names and values; column names are matched case-insensitively.
func parseReplicaStatus(cols []string, vals []sql.NullString) replicaStatus {
	byName := make(map[string]sql.NullString, len(cols))
	for i, c := range cols {
		if i < len(vals) {
			byName[strings.ToLower(c)] = vals[i]
		}
	}
	get := func(field string) sql.NullString {
		for _, name := range statusColumns[field] {
			if v, ok := byName[name]; ok {
				return v
			}
		}
		return sql.NullString{}
	}
	return replicaStatus{
		present:    true,
		ioRunning:  get("io").String,
		sqlRunning: get("sql").String,
		lag:        get("lag"),
		ioError:    get("ioerr").String,
		sqlError:   get("sqerr").String,
	}
}

// evaluate decides whether a replica in status st may take reads with
// maxLag. It returns the lag when known, and the reason when not healthy.
// Only "Yes" counts as running (not "Connecting", "Preparing", ...), and a
// NULL or unreadable lag is unknown, never 0.
func (st replicaStatus) evaluate(maxLag time.Duration) (lag time.Duration, lagKnown bool, err error) {
	if !st.present {
		return 0, false, ErrNotReplica
	}
	if !strings.EqualFold(st.ioRunning, "Yes") || !strings.EqualFold(st.sqlRunning, "Yes") {
		return 0, false, fmt.Errorf("%w: IO thread %s, SQL thread %s%s", ErrReplicationStopped,
			orNone(st.ioRunning), orNone(st.sqlRunning), st.lastErrors())
	}
	if !st.lag.Valid {
		return 0, false, fmt.Errorf("%w: Seconds_Behind_Master is NULL", ErrLagUnknown)
	}
	secs, perr := strconv.ParseInt(strings.TrimSpace(st.lag.String), 10, 64)
	if perr != nil {
		return 0, false, fmt.Errorf("%w: Seconds_Behind_Master is %q", ErrLagUnknown, st.lag.String)
	}
	lag = time.Duration(max(secs, 0)) * time.Second
	if lag > maxLag {
		return lag, true, fmt.Errorf("%w: %s behind, maximum %s", ErrLagging, lag, maxLag)
	}
	return lag, true, nil
}

func (st replicaStatus) lastErrors() string {
	var s string
	if st.ioError != "" {
		s += "; last IO error: " + st.ioError
	}
	if st.sqlError != "" {
		s += "; last SQL error: " + st.sqlError
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
