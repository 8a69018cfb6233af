package proxy

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// routedProxy is a proxy with the bed's replica configured.
func routedProxy(t *testing.T, edits ...func(*rules.Config)) *testProxy {
	t.Helper()
	return startProxy(t, func(c *rules.Config) {
		c.Backends.Replicas = []string{testbedFor(t).ReplicaAddr}
		c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
		for _, e := range edits {
			e(c)
		}
	})
}

// serverID runs q (which must return @@server_id as its first column) on
// db, or on tx when not nil.
func serverID(t *testing.T, q interface {
	QueryRow(string, ...any) *sql.Row
}, query string, args ...any) int {
	t.Helper()
	var id int
	if err := q.QueryRow(query, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return id
}

const primaryID, replicaID = 1, 2

func TestRouting(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	direct := p.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	waitReplica(t, p)

	for _, mode := range []struct{ name, params string }{{"text", "interpolateParams=true"}, {"prepared", ""}} {
		t.Run(mode.name, func(t *testing.T) {
			h := p.db(t, db, mode.params)
			h.SetMaxOpenConns(1)
			cases := []struct {
				name  string
				query string
				want  int
			}{
				{"plain select", "SELECT @@server_id FROM t WHERE id = ?", replicaID},
				{"for update", "SELECT @@server_id FROM t WHERE id = ? FOR UPDATE", primaryID},
				{"lock in share mode", "SELECT @@server_id FROM t WHERE id = ? LOCK IN SHARE MODE", primaryID},
				{"for update in a subquery", "SELECT @@server_id FROM t WHERE id IN (SELECT id FROM t WHERE id = ? FOR UPDATE)", primaryID},
				{"hint", "SELECT /* lockproxy:primary */ @@server_id FROM t WHERE id = ?", primaryID},
				{"user variable assignment", "SELECT @@server_id + 0 * (@x := ?)", primaryID},
			}
			for _, c := range cases {
				if got := serverID(t, h, c.query, 1); got != c.want {
					t.Errorf("%s: served by server %d, want %d", c.name, got, c.want)
				}
			}
			tx, err := h.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if got := serverID(t, tx, "SELECT @@server_id FROM t WHERE id = ?", 1); got != primaryID {
				t.Errorf("read in a transaction served by %d", got)
			}
			_ = tx.Rollback()

			conn, err := h.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
				t.Fatal(err)
			}
			var id int
			if err := conn.QueryRowContext(ctx, "SELECT @@server_id FROM t WHERE id = ?", 1).Scan(&id); err != nil || id != primaryID {
				t.Errorf("read with autocommit=0 served by %d (%v)", id, err)
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "SET autocommit = 1"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (?, 0) ON DUPLICATE KEY UPDATE v = v + 1", 1000); err != nil {
				t.Fatal(err)
			}
			var lid, sid int
			if err := conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID(), @@server_id").Scan(&lid, &sid); err != nil || sid != primaryID {
				t.Errorf("SELECT LAST_INSERT_ID() served by %d (%v)", sid, err)
			}
		})
	}
}

func TestReadYourWrites(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE rw (id INT PRIMARY KEY, v VARCHAR(20))")
	waitReplica(t, p)
	h := p.db(t, db, "interpolateParams=true")
	h.SetMaxOpenConns(1)
	onReplica := 0
	for i := 1; i <= 1000; i++ {
		if _, err := h.Exec("INSERT INTO rw VALUES (?, 'x')", i); err != nil {
			t.Fatal(err)
		}
		var n, sid int
		if err := h.QueryRow("SELECT COUNT(*), @@server_id FROM rw WHERE id = ?", i).Scan(&n, &sid); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("write %d not visible to the session's next read (served by %d)", i, sid)
		}
		if sid == replicaID {
			onReplica++
		}
	}
	t.Logf("1000 reads after writes: %d served by the replica, %d by the primary", onReplica, 1000-onReplica)
}

func TestSessionStateOnReplica(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	other := db + "_b"
	d := p.direct(t, "", "")
	testbed.MustExec(t, d, "DROP DATABASE IF EXISTS `"+other+"`", "CREATE DATABASE `"+other+"`")
	waitReplica(t, p)
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	testbed.MustExec(t, h, "USE `"+other+"`", "SET time_zone = '+05:30'", "SET sql_mode = 'ANSI_QUOTES'")
	var sid int
	var dbName, tz, mode string
	if err := h.QueryRow("SELECT @@server_id, DATABASE(), @@time_zone, @@sql_mode").Scan(&sid, &dbName, &tz, &mode); err != nil {
		t.Fatal(err)
	}
	if sid != replicaID || dbName != other || tz != "+05:30" || mode != "ANSI_QUOTES" {
		t.Fatalf("replica read saw server %d db %q tz %q sql_mode %q", sid, dbName, tz, mode)
	}
}

func TestReplicaFailover(t *testing.T) {
	bed := testbed.Private(t) // this test stops and kills the replica
	p := startProxyOn(t, bed, func(c *rules.Config) {
		c.Backends.Replicas = []string{bed.ReplicaAddr}
	}, nil)
	h := p.db(t, "", "")
	ctx := context.Background()
	waitReplica(t, p)
	if got := serverID(t, h, "SELECT @@server_id"); got != replicaID {
		t.Fatalf("healthy replica not used (server %d)", got)
	}
	t.Run("stopped replication", func(t *testing.T) {
		if err := bed.StopReplica(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := bed.StartReplica(ctx); err != nil {
				t.Fatal(err)
			}
		}()
		testbed.Eventually(t, 10*time.Second, "reads move to the primary", func() bool {
			return serverID(t, h, "SELECT @@server_id") == primaryID
		})
	})
	testbed.Eventually(t, 10*time.Second, "reads return to the replica after START SLAVE", func() bool {
		return serverID(t, h, "SELECT @@server_id") == replicaID
	})
	t.Run("replica killed", func(t *testing.T) {
		if err := bed.KillReplica(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := bed.RestartReplica(ctx); err != nil {
				t.Fatal(err)
			}
		}()
		for i := 0; i < 50; i++ {
			if got := serverID(t, h, "SELECT @@server_id"); got != primaryID {
				t.Fatalf("read %d served by %d with the replica dead", i, got)
			}
		}
	})
	testbed.Eventually(t, 20*time.Second, "reads return to the restarted replica", func() bool {
		return serverID(t, h, "SELECT @@server_id") == replicaID
	})
}

// waitReplica waits until the replica has applied everything so far and
// the proxy's router sees it healthy.
func waitReplica(t *testing.T, p *testProxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.bed.WaitReplicaCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "router sees the replica healthy", func() bool {
		_, ok := p.srv.loaded().router.Pick()
		return ok
	})
}

// TestExecuteWithoutCursorOnReplica: an execute whose flags ask for no
// cursor goes to the replica whatever its other flag bits (go-mysql sets
// 0x08 whenever a statement has parameters); one that asks for a cursor
// stays on the primary (its fetches go there).
func TestExecuteWithoutCursorOnReplica(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	waitReplica(t, p)
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Prepare("SELECT @@server_id FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Execute(1)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := r.GetInt(0, 0); id != replicaID {
		t.Errorf("go-mysql execute (flags 0x08) served by server %d, want the replica %d", id, replicaID)
	}
	var id int
	h := p.db(t, db, "")
	if err := h.QueryRow("SELECT @@server_id FROM t WHERE id = ?", 1).Scan(&id); err != nil || id != replicaID {
		t.Errorf("go-sql-driver execute (flags 0) served by server %d (%v), want the replica", id, err)
	}
}
