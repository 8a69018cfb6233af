package proxy

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
)

// cutRelay forwards TCP connections from its own loopback address to
// target until it is cut: then its listener and every connection through
// it are closed (new ones are refused), as when the network to a server
// fails, until it is restored on the same address. The server behind it
// keeps running, so this is an outage without a restart.
type cutRelay struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newCutRelay(t *testing.T, target string) *cutRelay {
	t.Helper()
	r := &cutRelay{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.cut)
	return r
}

func (r *cutRelay) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", r.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns[c], r.conns[s] = true, true
			r.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
}

// cut closes the listener and every relayed connection.
func (r *cutRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		_ = r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
}

// restore listens on the relay's address again.
func (r *cutRelay) restore(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		ln, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.serve(ln)
			return
		}
		if i == 50 {
			t.Fatalf("relay address %s taken meanwhile: %v", r.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLockServiceOutageWaitedOut: a guarded statement that meets a lock
// service it cannot reach keeps trying for as long as its wait_timeout: an
// outage shorter than that costs latency and no error; one that outlasts
// it answers 1205 (retried by applications, unlike 1105) naming the cause,
// counted as a rejection for "unavailable". The statement never runs
// without its lock.
func TestLockServiceOutageWaitedOut(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	mustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 100)")
	relay := newCutRelay(t, testbed.Get(t).RedisAddr)
	rdb := redis.NewClient(&redis.Options{Addr: relay.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testbed.UniqueName(t)
	const wait = 2 * time.Second
	locker := redislock.New(rdb, &redislock.Options{TTL: 3 * time.Second, Prefix: prefix})
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn}, OnUnkeyed: rules.OnUnkeyedReject,
			WaitTimeout: rules.Duration(wait)}}
	}, locker)
	h := p.db(t, db, "")
	ctx := context.Background()
	stock := func() int {
		var n int
		if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := h.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatalf("with Redis reachable: %v", err)
	}

	t.Run("shorter than the wait", func(t *testing.T) {
		before := stock()
		relay.cut()
		done := make(chan error, 1)
		began := time.Now()
		go func() {
			_, err := h.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
			done <- err
		}()
		time.Sleep(wait / 3)
		if got := stock(); got != before {
			t.Fatalf("the UPDATE ran while the lock service was away: %d → %d", before, got)
		}
		relay.restore(t)
		if err := <-done; err != nil {
			t.Fatalf("UPDATE across a %v outage: %v, want it to wait the outage out", wait/3, err)
		}
		if took := time.Since(began); took < wait/3 {
			t.Errorf("UPDATE answered after %v, before the outage of %v ended", took, wait/3)
		}
		if got := stock(); got != before-1 {
			t.Errorf("stock %d → %d, want one decrement", before, got)
		}
	})

	t.Run("longer than the wait", func(t *testing.T) {
		before := stock()
		refused := testutil.ToFloat64(p.srv.metrics.rejects.WithLabelValues("sku-stock", "unavailable"))
		relay.cut()
		defer relay.restore(t)
		_, err := h.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
		me := mysqlErr(t, err)
		if me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "lock service unavailable during the wait") {
			t.Errorf("UPDATE with the lock service away past the wait: %v, want lockproxy's 1205 naming the cause", err)
		}
		if got := stock(); got != before {
			t.Errorf("the UPDATE ran without its lock: %d → %d", before, got)
		}
		if got := testutil.ToFloat64(p.srv.metrics.rejects.WithLabelValues("sku-stock", "unavailable")); got != refused+1 {
			t.Errorf("rejections for unavailable: %v → %v, want one more", refused, got)
		}
	})
}
