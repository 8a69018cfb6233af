package router

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// within bounds every "eventually" of the integration tests. It is a
// deadline against hangs, not a speed requirement: health checks run every
// testInterval, so a change shows within an interval or two.
const (
	within       = 10 * time.Second
	testInterval = 100 * time.Millisecond
)

// breakable returns a bed this test may stop replication on or kill
// servers of: the binary's own bed, or a private one when the bed is
// shared with other test processes.
func breakable(t *testing.T) *testbed.Bed {
	t.Helper()
	if bed := testbed.Get(t); !bed.Shared {
		return bed
	}
	return testbed.Private(t)
}

// bedConfig is a router configuration for bed's primary and replica.
func bedConfig(bed *testbed.Bed) Config {
	return Config{
		Primary:        bed.PrimaryAddr,
		Replicas:       []string{bed.ReplicaAddr},
		MaxLag:         2 * time.Second,
		HealthInterval: testInterval,
		User:           bed.User,
		Password:       bed.Password,
		ConnectTimeout: 2 * time.Second,
		QueryTimeout:   2 * time.Second,
	}
}

// startRouter starts a router on cfg with its own registry and closes it
// when t ends. Start returns after the first check of every backend.
func startRouter(t *testing.T, cfg Config) (*Router, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r := New(cfg, zaptest.NewLogger(t), reg)
	t.Cleanup(r.Close)
	r.Start(context.Background())
	return r, reg
}

// statusOf returns the status of the backend at addr, the replica if the
// primary has the same address (as find does).
func statusOf(r *Router, addr string) BackendStatus {
	all := r.Status()
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Addr == addr {
			return all[i]
		}
	}
	return BackendStatus{Addr: addr, LastError: "not configured"}
}

// errOf returns the reason the backend at addr is out (nil when healthy).
func errOf(r *Router, addr string) error {
	if b := r.find(addr); b != nil {
		return b.snapshot().err
	}
	return fmt.Errorf("%s not configured", addr)
}

// replicaIn is a condition: the replica at addr is picked for reads.
func replicaIn(r *Router, addr string) func() (bool, string) {
	return func() (bool, string) {
		got, ok := r.Pick()
		return ok && got == addr, fmt.Sprintf("Pick() = %q, %v; status %+v", got, ok, statusOf(r, addr))
	}
}

// replicaOut is a condition: the replica at addr is out for want.
func replicaOut(r *Router, addr string, want error) func() (bool, string) {
	return func() (bool, string) {
		got, ok := r.Pick()
		err := errOf(r, addr)
		return !ok && isErr(err, want), fmt.Sprintf("Pick() = %q, %v; reason %v", got, ok, err)
	}
}

// gauge reads one series of a router metric.
func gauge(v *prometheus.GaugeVec, labels ...string) float64 {
	return testutil.ToFloat64(v.WithLabelValues(labels...))
}
