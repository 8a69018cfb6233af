package proxy

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// backendThreadOf is the backend thread id of the session lockproxy
// greeted with id.
func backendThreadOf(t *testing.T, p *testProxy, id uint32) uint32 {
	t.Helper()
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	sess := p.srv.sessions[id]
	if sess == nil {
		t.Fatalf("no session %d", id)
	}
	return sess.pub.thread.Load()
}

// TestPrimaryGoneClosesClient: when MariaDB closes a session's backend connection, lockproxy closes the
// client's, as MariaDB would: no ERR packet with a client-side code, no
// session that looks alive because its reads go to a replica, and a
// client pool's liveness check recovers. The session keeps its
// connection (multiplexed, one between commands holds none:
// TestMultiplexIdleWaitTimeout, TestMultiplexKillIdle).
func TestPrimaryGoneClosesClient(t *testing.T) {
	p := routedProxy(t, pinned)
	db := freshDB(t, p)
	direct := p.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	waitReplica(t, p)

	for _, idle := range []time.Duration{0, 3 * goneCheckEvery} {
		t.Run(fmt.Sprintf("killed, next read after %v", idle), func(t *testing.T) {
			c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Execute("SELECT id FROM t WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			testbed.MustExec(t, direct, fmt.Sprintf("KILL CONNECTION %d", backendThreadOf(t, p, c.GetConnectionID())))
			time.Sleep(idle)
			// An autocommit read a replica could serve.
			_, err = c.Execute("SELECT id FROM t WHERE id = 1")
			var me *gomysql.MyError
			if err == nil || errors.As(err, &me) {
				t.Fatalf("read after the backend was killed: want the connection closed, got %v", err)
			}
		})
	}

	t.Run("wait_timeout, pool recovers", func(t *testing.T) {
		before := testutil.ToFloat64(p.srv.metrics.backendErrors.WithLabelValues("primary"))
		h := p.db(t, db, "")
		h.SetMaxOpenConns(1)
		h.SetMaxIdleConns(1)
		testbed.MustExec(t, h, "SET @@SESSION.wait_timeout = 1")
		time.Sleep(2*time.Second + 2*goneCheckEvery)
		var n int
		if err := h.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 1 {
			t.Fatalf("the pool did not recover from the closed connection: %d, %v", n, err)
		}
		if got := testutil.ToFloat64(p.srv.metrics.backendErrors.WithLabelValues("primary")); got != before+1 {
			t.Errorf("primary backend errors %v, want %v", got, before+1)
		}
	})
}
