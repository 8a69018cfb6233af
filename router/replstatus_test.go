package router

import (
	"database/sql"
	"errors"
	"testing"
	"time"
)

func TestReplicaStatusEvaluate(t *testing.T) {
	null := sql.NullString{}
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	slave := []string{"Slave_IO_Running", "Slave_SQL_Running", "Seconds_Behind_Master", "Last_IO_Error", "Last_SQL_Error"}
	replica := []string{"Replica_IO_Running", "Replica_SQL_Running", "Seconds_Behind_Source", "Last_IO_Error", "Last_SQL_Error"}
	tests := []struct {
		name     string
		cols     []string
		vals     []sql.NullString
		empty    bool // no row at all
		wantErr  error
		wantLag  time.Duration
		lagKnown bool
	}{
		{"in sync", slave, []sql.NullString{str("Yes"), str("Yes"), str("0"), str(""), str("")}, false, nil, 0, true},
		{"lag at maximum is in", slave, []sql.NullString{str("Yes"), str("Yes"), str("2"), str(""), str("")}, false, nil, 2 * time.Second, true},
		{"lag above maximum", slave, []sql.NullString{str("Yes"), str("Yes"), str("3"), str(""), str("")}, false, ErrLagging, 3 * time.Second, true},
		{"NULL lag is unknown, not 0", slave, []sql.NullString{str("Yes"), str("Yes"), null, str(""), str("")}, false, ErrLagUnknown, 0, false},
		{"garbage lag is unknown", slave, []sql.NullString{str("Yes"), str("Yes"), str("soon"), str(""), str("")}, false, ErrLagUnknown, 0, false},
		{"SQL thread stopped", slave, []sql.NullString{str("Yes"), str("No"), null, str(""), str("")}, false, ErrReplicationStopped, 0, false},
		{"IO thread stopped, lag 0 shown", slave, []sql.NullString{str("No"), str("Yes"), str("0"), str(""), str("")}, false, ErrReplicationStopped, 0, false},
		{"IO thread connecting", slave, []sql.NullString{str("Connecting"), str("Yes"), str("0"), str("error reconnecting"), str("")}, false, ErrReplicationStopped, 0, false},
		{"SQL error", slave, []sql.NullString{str("Yes"), str("No"), null, str(""), str("Duplicate entry")}, false, ErrReplicationStopped, 0, false},
		{"not a replica", nil, nil, true, ErrNotReplica, 0, false},
		{"MySQL 8 column names", replica, []sql.NullString{str("Yes"), str("Yes"), str("1"), str(""), str("")}, false, nil, time.Second, true},
		{"MySQL 8 column names lagging", replica, []sql.NullString{str("Yes"), str("Yes"), str("30"), str(""), str("")}, false, ErrLagging, 30 * time.Second, true},
		{"columns missing", []string{"Master_Host"}, []sql.NullString{str("x")}, false, ErrReplicationStopped, 0, false},
		{"lower-case names", []string{"slave_io_running", "slave_sql_running", "seconds_behind_master"}, []sql.NullString{str("Yes"), str("Yes"), str("0")}, false, nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := replicaStatus{}
			if !tt.empty {
				st = parseReplicaStatus(tt.cols, tt.vals)
			}
			lag, known, err := st.evaluate(2 * time.Second)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if lag != tt.wantLag || known != tt.lagKnown {
				t.Errorf("lag = %s known=%v, want %s known=%v", lag, known, tt.wantLag, tt.lagKnown)
			}
		})
	}
}
