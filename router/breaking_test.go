package router

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// These tests break replication or kill servers, so they run on a bed no
// other test process shares (see breakable) and put it back replicating
// before they end, whether they pass or not.

// restoreReplication makes sure, when t ends, that the replica runs and has
// caught up with the primary.
func restoreReplication(t *testing.T, bed *testbed.Bed) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := bed.StartReplica(ctx); err != nil {
			t.Errorf("restoring replication: %v", err)
			return
		}
		if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
			t.Errorf("restoring replication: %v", err)
		}
	})
}

func TestReplicationStopped(t *testing.T) {
	bed := breakable(t)
	tests := []struct{ name, stop string }{
		{"both threads", "STOP SLAVE"},
		// MariaDB shows Seconds_Behind_Master NULL with the SQL thread stopped.
		{"SQL thread", "STOP SLAVE SQL_THREAD"},
		// ...and NULL with only the IO thread stopped, while the SQL thread
		// idles: nothing new arrives, so the lag is unknown.
		{"IO thread", "STOP SLAVE IO_THREAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			restoreReplication(t, bed)
			r, _ := startRouter(t, bedConfig(bed))
			testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))

			testbed.MustExec(t, bed.Open(t, bed.ReplicaAddr, ""), tt.stop)
			testbed.EventuallyWhy(t, within, "replica out after "+tt.stop, replicaOut(r, bed.ReplicaAddr, ErrReplicationStopped))
			st := statusOf(r, bed.ReplicaAddr)
			if st.Healthy || !st.Up || st.LagKnown {
				t.Errorf("status with replication stopped = %+v; want up, unhealthy, lag unknown", st)
			}
			if v := gauge(r.metrics.healthy, bed.ReplicaAddr); v != 0 {
				t.Errorf("lockproxy_replica_healthy = %v, want 0", v)
			}
			if v := gauge(r.metrics.lag, bed.ReplicaAddr); !math.IsNaN(v) {
				t.Errorf("lockproxy_replica_lag_seconds = %v with replication stopped, want NaN", v)
			}
			if v := gauge(r.metrics.up, bed.ReplicaAddr, "replica"); v != 1 {
				t.Errorf("lockproxy_backend_up = %v, want 1 (the server answers)", v)
			}
			if !r.PrimaryHealthy() {
				t.Error("PrimaryHealthy() = false while only the replica is stopped")
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := bed.StartReplica(ctx); err != nil {
				t.Fatal(err)
			}
			testbed.EventuallyWhy(t, within, "replica back after START SLAVE", replicaIn(r, bed.ReplicaAddr))
		})
	}
}

// TestLagBeyondMax makes the replica fall behind deterministically: a
// transaction on the replica holds a row lock, so the SQL thread blocks on
// the next replicated update of that row. Both threads keep running and
// MariaDB reports Seconds_Behind_Master as the age of the event being
// applied, growing by one a second (it stays 0 for the first second).
// Once the lock is released the replica catches up and reports 0.
func TestLagBeyondMax(t *testing.T) {
	bed := breakable(t)
	restoreReplication(t, bed)
	dbName := bed.TempDatabase(t)
	primary := bed.Open(t, bed.PrimaryAddr, dbName)
	testbed.MustExec(t, primary, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := bedConfig(bed)
	cfg.MaxLag = time.Second
	r, _ := startRouter(t, cfg)
	testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))

	blocker, err := bed.Open(t, bed.ReplicaAddr, dbName).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	var v int
	if err := blocker.QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, primary, "UPDATE t SET v = v + 1 WHERE id = 1")

	testbed.EventuallyWhy(t, within, "replica out for lag", replicaOut(r, bed.ReplicaAddr, ErrLagging))
	st := statusOf(r, bed.ReplicaAddr)
	if !st.Up || !st.LagKnown || st.Lag <= cfg.MaxLag {
		t.Errorf("status while lagging = %+v; want up with a known lag above %s", st, cfg.MaxLag)
	}
	if lag := gauge(r.metrics.lag, bed.ReplicaAddr); !(lag > 1) {
		t.Errorf("lockproxy_replica_lag_seconds = %v, want > 1", lag)
	}

	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	testbed.EventuallyWhy(t, within, "replica back once caught up", replicaIn(r, bed.ReplicaAddr))
	if st := statusOf(r, bed.ReplicaAddr); st.Lag > cfg.MaxLag {
		t.Errorf("back in service with lag %s > %s", st.Lag, cfg.MaxLag)
	}
}

func TestReplicaKilled(t *testing.T) {
	bed := breakable(t)
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := bed.RestartReplica(ctx); err != nil {
			t.Errorf("restarting the replica: %v", err)
		}
	})
	r, _ := startRouter(t, bedConfig(bed))
	testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bed.KillReplica(ctx); err != nil {
		t.Fatal(err)
	}
	testbed.EventuallyWhy(t, within, "killed replica out", replicaOut(r, bed.ReplicaAddr, ErrCheckFailed))
	if _, release, ok := r.PickAndTrack(); ok {
		release()
		t.Error("PickAndTrack() found a replica while it is dead")
	}
	if v := gauge(r.metrics.up, bed.ReplicaAddr, "replica"); v != 0 {
		t.Errorf("lockproxy_backend_up{replica} = %v after kill, want 0", v)
	}
	if !r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() = false while only the replica is dead")
	}

	if err := bed.RestartReplica(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testbed.EventuallyWhy(t, within, "restarted replica back", replicaIn(r, bed.ReplicaAddr))
}

// TestPrimaryKilled: with the primary dead, PrimaryHealthy is false (the
// session fails fast) and the replica goes out too, since its IO thread
// is reconnecting ("Connecting", not "Yes") and its lag is unknown.
func TestPrimaryKilled(t *testing.T) {
	bed := breakable(t)
	started := false
	t.Cleanup(func() {
		if started {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := bed.Start(ctx, testbed.Primary); err != nil {
			t.Errorf("restarting the primary: %v", err)
		}
	})
	r, _ := startRouter(t, bedConfig(bed))
	testbed.EventuallyWhy(t, within, "replica in service", replicaIn(r, bed.ReplicaAddr))
	if !r.PrimaryHealthy() {
		t.Fatal("PrimaryHealthy() = false before the kill")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bed.Kill(ctx, testbed.Primary); err != nil {
		t.Fatal(err)
	}
	testbed.EventuallyWhy(t, within, "primary down", func() (bool, string) {
		return !r.PrimaryHealthy(), "status " + statusOf(r, bed.PrimaryAddr).LastError
	})
	testbed.EventuallyWhy(t, within, "replica of a dead primary out", replicaOut(r, bed.ReplicaAddr, ErrReplicationStopped))

	if err := bed.Start(ctx, testbed.Primary); err != nil {
		t.Fatal(err)
	}
	started = true
	testbed.EventuallyWhy(t, within, "primary back", func() (bool, string) {
		return r.PrimaryHealthy(), "status " + statusOf(r, bed.PrimaryAddr).LastError
	})
	testbed.EventuallyWhy(t, within, "replica back with its primary", replicaIn(r, bed.ReplicaAddr))
}
