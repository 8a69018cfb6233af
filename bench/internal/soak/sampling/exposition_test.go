package sampling

import (
	"strings"
	"testing"
)

func TestParseExposition(t *testing.T) {
	in := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 21
process_open_fds 32
lockproxy_queries_total{kind="query",route="primary"} 100
lockproxy_queries_total{kind="execute",route="primary"} 7
lockproxy_queries_total{kind="query",route="replica"} 3e+01
lockproxy_lock_hot_key_wait_seconds{key="a} b\"c",rule="r"} 0.5
lockproxy_replica_lag_seconds{backend="x"} NaN
`
	m, err := ParseExposition(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		match []string
		want  float64
	}{
		{"go_goroutines", nil, 21},
		{"process_open_fds", nil, 32},
		{"lockproxy_queries_total", nil, 137},
		{"lockproxy_queries_total", []string{`route="primary"`}, 107},
		{"lockproxy_queries_total", []string{`route="primary"`, `kind="execute"`}, 7},
		{"lockproxy_queries_total", []string{`route="replica"`, `kind="execute"`}, 0},
		{"lockproxy_lock_hot_key_wait_seconds", []string{`rule="r"`}, 0.5},
		{"absent", nil, 0},
	}
	for _, tt := range tests {
		if got := m.Sum(tt.name, tt.match...); got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	if !m.Has("lockproxy_replica_lag_seconds") || m.Has("absent") {
		t.Error("Has is wrong")
	}
	for _, bad := range []string{"x{a=\"1\" 2\n", "x\n", "x abc\n", "{a=\"1\"} 2\n"} {
		if _, err := ParseExposition(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseExposition(%q): want an error", bad)
		}
	}
}
