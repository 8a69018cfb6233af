package router

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func isErr(err, want error) bool { return errors.Is(err, want) }

func TestHealthyReplicaIsPicked(t *testing.T) {
	bed := testbed.Get(t)
	r, _ := startRouter(t, bedConfig(bed))
	testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))
	if !r.PrimaryHealthy() {
		t.Fatalf("PrimaryHealthy() = false with the primary up: %+v", statusOf(r, bed.PrimaryAddr))
	}
	rep := statusOf(r, bed.ReplicaAddr)
	if !rep.Healthy || !rep.Up || !rep.LagKnown || rep.Lag > 2*time.Second || rep.LastError != "" || rep.Role != RoleReplica {
		t.Errorf("replica status = %+v", rep)
	}
	if _, err := ParseGTIDPos(rep.GTIDPos); err != nil || rep.GTIDPos == "" {
		t.Errorf("replica GTID position %q: %v", rep.GTIDPos, err)
	}
	m := r.metrics
	for name, got := range map[string]float64{
		"lockproxy_replica_healthy":         gauge(m.healthy, bed.ReplicaAddr),
		"lockproxy_backend_up{replica}":     gauge(m.up, bed.ReplicaAddr, "replica"),
		"lockproxy_backend_up{primary}":     gauge(m.up, bed.PrimaryAddr, "primary"),
		"lockproxy_health_checks_total{ok}": testutil.ToFloat64(m.checks.WithLabelValues(bed.ReplicaAddr, "ok")),
	} {
		if got < 1 {
			t.Errorf("%s = %v, want ≥ 1", name, got)
		}
	}
	if lag := gauge(m.lag, bed.ReplicaAddr); math.IsNaN(lag) || lag > 2 {
		t.Errorf("lockproxy_replica_lag_seconds = %v, want a known lag ≤ 2", lag)
	}
	addr, release, ok := r.PickAndTrack()
	if !ok || addr != bed.ReplicaAddr || statusOf(r, addr).Outstanding != 1 {
		t.Errorf("PickAndTrack() = %q, %v; outstanding %d", addr, ok, statusOf(r, addr).Outstanding)
	}
	release()
}

func TestReadYourWritesGTID(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	r, _ := startRouter(t, bedConfig(bed))
	testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))

	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := bed.Open(t, bed.PrimaryAddr, dbName).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testbed.MustExec(t, conn, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	var gtid string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.last_gtid").Scan(&gtid); err != nil || gtid == "" {
		t.Fatalf("last_gtid = %q: %v", gtid, err)
	}

	// The router learns the replica has the write from its checks...
	testbed.EventuallyWhy(t, within, "replica reaches the session's write", func() (bool, string) {
		addr, release, ok := r.PickFor(gtid)
		release()
		return ok && addr == bed.ReplicaAddr, "replica at " + statusOf(r, bed.ReplicaAddr).GTIDPos + ", want " + gtid
	})
	if !GTIDReached(statusOf(r, bed.ReplicaAddr).GTIDPos, gtid) {
		t.Errorf("PickFor chose a replica whose recorded position has not reached %s", gtid)
	}
	// ...and the wait query built from that GTID runs on the replica.
	q := WaitGTIDQuery(gtid, 5*time.Second)
	var res int
	if err := bed.Open(t, bed.ReplicaAddr, "").QueryRowContext(ctx, q).Scan(&res); err != nil || res != 0 {
		t.Fatalf("%s = %d, %v; want 0", q, res, err)
	}
	// A position the primary has not reached yet is not reached anywhere.
	future := GTIDPos{{Domain: 0, Server: 1, Seq: math.MaxUint64}}.String()
	if addr, release, ok := r.PickFor(future); ok {
		release()
		t.Errorf("PickFor(%s) = %q", future, addr)
	}
}

func TestUnfitBackends(t *testing.T) {
	bed := testbed.Get(t)
	closed := closedPort(t)
	tests := []struct {
		name    string
		edit    func(*Config)
		addr    string // the replica to look at
		wantErr error
		up      float64
	}{
		{"replica not listening", func(c *Config) { c.Replicas = []string{closed} }, closed, ErrCheckFailed, 0},
		{"server that replicates from nothing", func(c *Config) { c.Replicas = []string{bed.PrimaryAddr} }, bed.PrimaryAddr, ErrNotReplica, 1},
		{"wrong password", func(c *Config) { c.Password = "not-" + bed.Password }, bed.ReplicaAddr, ErrCheckFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := bedConfig(bed)
			tt.edit(&cfg)
			r, _ := startRouter(t, cfg)
			testbed.EventuallyWhy(t, within, "replica out", replicaOut(r, tt.addr, tt.wantErr))
			st := statusOf(r, tt.addr)
			if st.Healthy || !st.Checked || st.LagKnown || st.LastError == "" {
				t.Errorf("status = %+v", st)
			}
			if strings.Contains(st.LastError, cfg.Password) {
				t.Errorf("last error shows the password: %s", st.LastError)
			}
			if got := gauge(r.metrics.up, tt.addr, "replica"); got != tt.up {
				t.Errorf("lockproxy_backend_up = %v, want %v", got, tt.up)
			}
			if got := gauge(r.metrics.healthy, tt.addr); got != 0 {
				t.Errorf("lockproxy_replica_healthy = %v, want 0", got)
			}
			if got := gauge(r.metrics.lag, tt.addr); !math.IsNaN(got) {
				t.Errorf("lockproxy_replica_lag_seconds = %v, want NaN (unknown)", got)
			}
		})
	}
}

func TestPrimaryNotListening(t *testing.T) {
	bed := testbed.Get(t)
	cfg := bedConfig(bed)
	cfg.Primary = closedPort(t)
	r, _ := startRouter(t, cfg) // Start waited for the first check
	if r.PrimaryHealthy() {
		t.Fatalf("PrimaryHealthy() = true for a closed port: %+v", statusOf(r, cfg.Primary))
	}
	if got := gauge(r.metrics.up, cfg.Primary, "primary"); got != 0 {
		t.Errorf("lockproxy_backend_up{primary} = %v, want 0", got)
	}
	if n := testutil.ToFloat64(r.metrics.checks.WithLabelValues(cfg.Primary, "error")); n < 1 {
		t.Errorf("lockproxy_health_checks_total{error} = %v, want ≥ 1", n)
	}
}

// TestMarkDownAndRecover: MarkDown starts a check at once, so with checks
// otherwise an hour apart the replica is still back quickly. (That the
// replica is out between MarkDown and that check is TestMarkDownHoldsUntilLaterCheck.)
func TestMarkDownAndRecover(t *testing.T) {
	bed := testbed.Get(t)
	cfg := bedConfig(bed)
	cfg.HealthInterval = time.Hour
	r, _ := startRouter(t, cfg) // Start waited for the first check
	if addr, ok := r.Pick(); !ok || addr != bed.ReplicaAddr {
		t.Fatalf("Pick() = %q, %v after the first check; status %+v", addr, ok, statusOf(r, bed.ReplicaAddr))
	}
	checks := func() float64 { return testutil.ToFloat64(r.metrics.checks.WithLabelValues(bed.ReplicaAddr, "ok")) }
	before := checks()
	r.MarkDown(bed.ReplicaAddr, errors.New("read: connection reset by peer"))
	testbed.EventuallyWhy(t, within, "replica back after the check MarkDown starts", func() (bool, string) {
		addr, ok := r.Pick()
		return ok && addr == bed.ReplicaAddr && checks() == before+1,
			fmt.Sprintf("Pick() = %q, %v; ok checks %v → %v; status %+v", addr, ok, before, checks(), statusOf(r, bed.ReplicaAddr))
	})
}

func TestUpdateAddsAndRemovesReplicas(t *testing.T) {
	bed := testbed.Get(t)
	cfg := bedConfig(bed)
	cfg.Replicas = nil
	r, reg := startRouter(t, cfg)
	if addr, ok := r.Pick(); ok {
		t.Fatalf("Pick() = %q with no replicas", addr)
	}
	cfg.Replicas = []string{bed.ReplicaAddr}
	r.Update(cfg)
	testbed.EventuallyWhy(t, within, "added replica in service", replicaIn(r, bed.ReplicaAddr))

	cfg.MaxLag = 5 * time.Second // a kept replica stays in service across a reload
	r.Update(cfg)
	if _, ok := r.Pick(); !ok {
		t.Errorf("Update with the same replica dropped its health: %+v", statusOf(r, bed.ReplicaAddr))
	}
	cfg.Replicas = nil
	r.Update(cfg)
	if addr, ok := r.Pick(); ok {
		t.Errorf("Pick() = %q after the replica was removed", addr)
	}
	if n := testutil.CollectAndCount(reg, "lockproxy_replica_healthy", "lockproxy_replica_lag_seconds"); n != 0 {
		t.Errorf("%d replica series left after removal, want 0", n)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestReplicaWithoutMonitorPrivilege: a check user that may not run SHOW
// SLAVE STATUS keeps the replica out, and the reason names the privilege.
func TestReplicaWithoutMonitorPrivilege(t *testing.T) {
	bed := testbed.Get(t)
	user := testbed.UniqueName(t)
	primary := bed.Open(t, bed.PrimaryAddr, "")
	testbed.MustExec(t, primary,
		"CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY 'pw-"+user+"'",
		"GRANT SELECT ON *.* TO '"+user+"'@'127.0.0.1'")
	t.Cleanup(func() { testbed.MustExec(t, primary, "DROP USER IF EXISTS '"+user+"'@'127.0.0.1'") })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := bedConfig(bed)
	cfg.User, cfg.Password = user, "pw-"+user
	r, _ := startRouter(t, cfg)
	testbed.EventuallyWhy(t, within, "replica out", replicaOut(r, bed.ReplicaAddr, ErrCheckFailed))
	if msg := statusOf(r, bed.ReplicaAddr).LastError; !strings.Contains(msg, "SLAVE MONITOR") {
		t.Errorf("reason %q does not name the missing privilege", msg)
	}
	if !r.PrimaryHealthy() {
		t.Errorf("PrimaryHealthy() = false; the primary check needs no privilege: %+v", statusOf(r, bed.PrimaryAddr))
	}
}
