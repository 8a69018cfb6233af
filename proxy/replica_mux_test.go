package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMultiplexReplicaReads: a multiplexing session borrows a replica
// connection for each read and gives it back: 24 sessions, each with a
// time zone of its own (a SET replayed on each connection it borrows),
// take turns reading by text and by prepared statement through at most
// two replica connections (one, and one more while the first is reset
// after a read its session's SET made dirty), and each sees its own
// session's state, as directly.
func TestMultiplexReplicaReads(t *testing.T) {
	p := routedProxy(t, multiplexed(4))
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
	waitReplica(t, p)
	ctx := context.Background()
	const sessions = 24
	pool := p.db(t, db, "")
	pool.SetMaxOpenConns(sessions)
	conns := make([]*sql.Conn, sessions)
	for i := range conns {
		c, err := pool.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 1 {
			mustConnExec(t, c, fmt.Sprintf("SET time_zone = '+%02d:00'", i%12))
		}
		conns[i] = c
	}
	replicaReads := func() float64 {
		return testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "query")) +
			testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "execute"))
	}
	before, reads, most := replicaReads(), 0, 0.0
	for round := range 6 {
		for i, c := range conns {
			wantTZ := "SYSTEM"
			if i%2 == 1 {
				wantTZ = fmt.Sprintf("+%02d:00", i%12)
			}
			var sid int
			var tz, d string
			if err := c.QueryRowContext(ctx, "SELECT @@server_id, @@time_zone, DATABASE()").Scan(&sid, &tz, &d); err != nil {
				t.Fatal(err)
			}
			if tz != wantTZ || d != db {
				t.Fatalf("session %d read time zone %s in %s, want %s in %s", i, tz, d, wantTZ, db)
			}
			id := 1 + (i+round)%3
			var v int
			if err := c.QueryRowContext(ctx, "SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != 10*id {
				t.Fatalf("session %d read v %d for id %d", i, v, id)
			}
			reads += 2
			most = max(most, sampleValue(t, p.reg, "lockproxy_backend_connections", "backend", p.bed.ReplicaAddr))
			// A connection a session's SET made dirty is reset in the
			// background before it is idle again; on a busy host the
			// next session's read may come first and open one more.
			// Each session's turn starts with the replica's connections
			// idle, so its two reads need one, or two while the first
			// one's reset runs.
			testbed.Eventually(t, 10*time.Second, "the replica's connections idle again", func() bool {
				return sampleWhere(t, p.reg, "lockproxy_backend_connections",
					map[string]string{"backend": p.bed.ReplicaAddr, "state": "in_use"}) == 0
			})
		}
	}
	served := replicaReads() - before
	t.Logf("%v of %d reads served by the replica; at most %v replica connections open", served, reads, most)
	if served < float64(reads)/2 {
		t.Errorf("only %v of %d reads reached the replica", served, reads)
	}
	if most > 2 || most == 0 {
		t.Errorf("%v replica connections open for %d sessions taking turns, want 1 or 2", most, sessions)
	}
}

// TestReplicaPreparedInOtherDatabase: a statement prepared in one
// database reads that database's table when executed after USE of
// another, as directly, never the other's from a replica; multiplexed,
// the connection it borrows prepares it again in its database
// (pool_stmt.go).
func TestReplicaPreparedInOtherDatabase(t *testing.T) {
	t.Run("pinned", func(t *testing.T) { replicaPreparedInOtherDatabase(t, routedProxy(t, pinned)) })
	t.Run("multiplexed", func(t *testing.T) { replicaPreparedInOtherDatabase(t, routedProxy(t, multiplexed(4))) })
}

func replicaPreparedInOtherDatabase(t *testing.T, p *testProxy) {
	db := freshDB(t, p)
	other := db + "_other"
	testbed.MustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS "+other, "CREATE DATABASE "+other)
	t.Cleanup(func() { _, _ = p.direct(t, "", "").Exec("DROP DATABASE IF EXISTS " + other) })
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10)")
	testbed.MustExec(t, p.direct(t, other, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 99)")
	waitReplica(t, p)
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Prepare("SELECT v FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, use := range []string{other, db, other, db} {
		if _, err := c.Execute("USE " + use); err != nil {
			t.Fatal(err)
		}
		r, err := st.Execute(1)
		if err != nil {
			t.Fatalf("execute after USE %s: %v", use, err)
		}
		if v, _ := r.GetInt(0, 0); v != 10 {
			t.Errorf("after USE %s the statement prepared in %s read v = %d, want 10", use, db, v)
		}
		r.Close()
	}
}

// TestMultiplexReplicaBound: backends.pool.max_connections bounds a
// replica's connections too; a read that finds them in use goes to the
// primary at once, and to the replica again once one is free.
func TestMultiplexReplicaBound(t *testing.T) {
	p := routedProxy(t, multiplexed(1))
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(3))", "INSERT INTO t VALUES (1, '1x')")
	waitReplica(t, p)
	ctx := context.Background()
	a, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	server := func(c *sql.Conn, q string) int {
		t.Helper()
		var id int
		var v any
		if err := c.QueryRowContext(ctx, q).Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// A read that leaves a warning keeps its replica connection until
	// the session's next command.
	if got := server(a, "SELECT @@server_id, CAST(s AS SIGNED) FROM t"); got != replicaID {
		t.Fatalf("a's read ran on server %d, want the replica", got)
	}
	if got := server(b, "SELECT @@server_id, s FROM t"); got != primaryID {
		t.Errorf("with the replica's one connection held, b's read ran on server %d, want the primary", got)
	}
	if n := sampleValue(t, p.reg, "lockproxy_backend_connection_waits_total", "outcome", "primary"); n != 1 {
		t.Errorf("waits_total{outcome=primary} = %v, want 1", n)
	}
	if got := muxAnswer(a, "SHOW WARNINGS"); !strings.Contains(got, "1292") {
		t.Errorf("a's warnings: %s", got)
	}
	if got := server(a, "SELECT @@server_id, s FROM t"); got != replicaID {
		t.Fatalf("a's clean read ran on server %d, want the replica", got)
	}
	if got := server(b, "SELECT @@server_id, s FROM t"); got != replicaID {
		t.Errorf("with the replica's connection free, b's read ran on server %d, want the replica", got)
	}
}
