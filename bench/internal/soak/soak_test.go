package soak

import (
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
)

func TestRepoRelative(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/r/bench/results/soak.csv", "bench/results/soak.csv"},
		{"/tmp/x.csv", "/tmp/x.csv"},
	} {
		if got := repoRelative("/r", c.path); got != c.want {
			t.Errorf("repoRelative(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestQuiet(t *testing.T) {
	idle := sampling.Sample{Gauges: map[string]float64{"go_goroutines": 21}}
	tests := []struct {
		name  string
		gauge string
		want  bool
	}{
		{"nothing held", "", true},
		{"a client connected", "lockproxy_client_connections", false},
		{"a lock held", "lockproxy_locks_held", false},
		{"a waiter", "lockproxy_lock_waiters", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy := sampling.Sample{Gauges: map[string]float64{}}
			if tt.gauge != "" {
				busy.Gauges[tt.gauge] = 1
			}
			if got := quiet([]sampling.Sample{idle, busy}); got != tt.want {
				t.Errorf("quiet = %v, want %v", got, tt.want)
			}
		})
	}
}
