package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/router"
	"github.com/lockproxy/lockproxy/rules"
)

// TestReadYourWritesAcrossConnections: under read_your_writes user and
// global, a pool that writes on one connection and reads on another reads
// its writes, whichever server answers; each write moves the mark the
// reads wait for. Under session the same reads may be stale (counted, not
// asserted: it depends on the replica's speed).
func TestReadYourWritesAcrossConnections(t *testing.T) {
	for _, scope := range []rules.ReadYourWrites{rules.RYWUser, rules.RYWGlobal, rules.RYWSession} {
		t.Run(string(scope), func(t *testing.T) {
			p := startProxy(t, func(c *rules.Config) {
				c.Backends.Replicas = []string{testbedFor(t).ReplicaAddr}
				c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
				c.Backends.ReadYourWrites = scope
			})
			db := freshDB(t, p)
			testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE rw (id INT PRIMARY KEY, v VARCHAR(20))")
			waitReplica(t, p)
			ctx := context.Background()
			h := p.db(t, db, "interpolateParams=true")
			w, r := testbed.Conn(t, h), testbed.Conn(t, h)
			const n = 300
			stale, onReplica := 0, 0
			for i := 1; i <= n; i++ {
				before := p.srv.marks.want(scope, p.bed.User, "")
				if _, err := w.ExecContext(ctx, "INSERT INTO rw VALUES (?, 'x')", i); err != nil {
					t.Fatal(err)
				}
				if scope != rules.RYWSession {
					after := p.srv.marks.want(scope, p.bed.User, "")
					a, err := router.ParseGTIDPos(after)
					if err != nil || len(a) == 0 {
						t.Fatalf("after write %d the %s mark is %q (%v)", i, scope, after, err)
					}
					if b, _ := router.ParseGTIDPos(before); b.Reached(a) {
						t.Fatalf("write %d did not move the %s mark past %q (now %q)", i, scope, before, after)
					}
				}
				var found, sid int
				if err := r.QueryRowContext(ctx, "SELECT COUNT(*), @@server_id FROM rw WHERE id = ?", i).Scan(&found, &sid); err != nil {
					t.Fatal(err)
				}
				if sid == replicaID {
					onReplica++
				}
				if found != 1 {
					stale++
					if scope != rules.RYWSession {
						t.Fatalf("write %d on one connection not visible to the pool's other connection (read served by server %d)", i, sid)
					}
				}
			}
			t.Logf("%s: %d reads on another connection after a write: %d served by the replica, %d stale", scope, n, onReplica, stale)
		})
	}
}
