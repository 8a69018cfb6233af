package testbed_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestPrivateBedBreakAndMend breaks each server the way integration tests
// will and checks it comes back in a known state.
func TestPrivateBedBreakAndMend(t *testing.T) {
	bed := testbed.Private(t)
	if bed.Shared {
		t.Fatal("a private bed says it is shared")
	}
	ctx := t.Context()
	name := bed.TempDatabase(t)
	primary := bed.Open(t, bed.PrimaryAddr, name)
	testbed.MustExec(t, primary, "CREATE TABLE t (id INT PRIMARY KEY)")
	if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("StopReplica holds rows back until StartReplica", func(t *testing.T) {
		if err := bed.StopReplica(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := bed.ReplicaStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st["Slave_SQL_Running"] != "No" {
			t.Fatalf("after STOP SLAVE, SQL thread = %q", st["Slave_SQL_Running"])
		}
		testbed.MustExec(t, primary, "INSERT INTO t VALUES (1)")
		replica := bed.Open(t, bed.ReplicaAddr, name)
		if n := count(t, replica, "SELECT COUNT(*) FROM t"); n != 0 {
			t.Fatalf("stopped replica already has %d rows", n)
		}
		if err := bed.StartReplica(ctx); err != nil {
			t.Fatal(err)
		}
		if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, replica, "SELECT COUNT(*) FROM t"); n != 1 {
			t.Fatalf("replica has %d rows after StartReplica, want 1", n)
		}
	})

	t.Run("KillReplica and RestartReplica", func(t *testing.T) {
		if err := bed.KillReplica(ctx); err != nil {
			t.Fatal(err)
		}
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := ping(pingCtx, bed, bed.ReplicaAddr); err == nil {
			t.Fatal("killed replica still answers")
		}
		if err := ping(pingCtx, bed, bed.PrimaryAddr); err != nil {
			t.Fatalf("primary died with the replica: %v", err)
		}
		testbed.MustExec(t, primary, "INSERT INTO t VALUES (2)")
		if err := bed.RestartReplica(ctx); err != nil {
			t.Fatal(err)
		}
		if err := bed.WaitReplicaCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
		replica := bed.Open(t, bed.ReplicaAddr, name)
		if n := count(t, replica, "SELECT COUNT(*) FROM t"); n != 2 {
			t.Fatalf("restarted replica has %d rows, want 2", n)
		}
	})

	t.Run("RestartRedis loses every key", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: bed.RedisAddr, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		key := testbed.UniqueName(t)
		if err := rdb.Set(ctx, key, "held", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := bed.RestartRedis(ctx); err != nil {
			t.Fatal(err)
		}
		var n int64
		var err error
		// The pool's old connection died with the server; the next one works.
		for range 3 {
			if n, err = rdb.Exists(ctx, key).Result(); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("key survived a Redis restart")
		}
	})
}

func ping(ctx context.Context, bed *testbed.Bed, addr string) error {
	db, err := sql.Open("mysql", bed.DSN(addr, "", "timeout=2s"))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}
