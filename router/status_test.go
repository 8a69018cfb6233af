package router

import (
	"encoding/json"
	"testing"
	"time"
)

func TestBackendStatusJSON(t *testing.T) {
	tests := []struct {
		name string
		st   BackendStatus
		lag  any // decoded lag_seconds
	}{
		{"known lag", BackendStatus{Addr: "r:1", Role: RoleReplica, Lag: 1500 * time.Millisecond, LagKnown: true}, 1.5},
		{"known zero lag", BackendStatus{Addr: "r:1", Role: RoleReplica, LagKnown: true}, 0.0},
		{"unknown lag is null, not 0", BackendStatus{Addr: "r:1", Role: RoleReplica, LastError: "router: replication is not running"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(tt.st)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if lag, ok := got["lag_seconds"]; !ok || lag != tt.lag {
				t.Errorf("lag_seconds = %v (present %v), want %v in %s", lag, ok, tt.lag, raw)
			}
			if got["addr"] != "r:1" || got["role"] != "replica" {
				t.Errorf("addr/role wrong in %s", raw)
			}
			if _, ok := got["Lag"]; ok {
				t.Errorf("raw Lag field leaked into %s", raw)
			}
		})
	}
}
