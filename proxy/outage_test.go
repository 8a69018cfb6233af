package proxy

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
// keeps running, so this is an outage without a restart. Silenced, it
// accepts connections but passes nothing either way, as a server that
// hangs or a network that drops packets: calls through it end only by
// their own deadlines.
type cutRelay struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	silent       bool
	lag          atomic.Int64 // each reply is held this long (ns) before it is passed on
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
			// Registered at once, so that a cut from here on closes it;
			// one that came before it (this listener is no longer the
			// relay's) closes it here.
			r.mu.Lock()
			if r.ln != ln {
				r.mu.Unlock()
				_ = c.Close()
				return
			}
			r.conns[c] = true
			silent := r.silent
			r.mu.Unlock()
			if silent {
				continue
			}
			s, err := net.Dial("tcp", r.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			if !r.conns[c] {
				// Cut or silenced while the target was dialled: a
				// connection relayed past a cut let a statement take
				// its lock through an outage.
				r.mu.Unlock()
				_ = c.Close()
				_ = s.Close()
				continue
			}
			r.conns[s] = true
			r.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { r.copyLagging(c, s); _ = c.Close() }()
		}
	}()
}

// copyLagging passes what the server sends on to the client, each read
// held back by the relay's lag: a slow server or a slow network.
func (r *cutRelay) copyLagging(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			time.Sleep(time.Duration(r.lag.Load()))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
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

// silence closes every relayed connection and holds new ones open and
// mute until cut or restored.
func (r *cutRelay) silence() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.silent = true
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
}

// restore relays again: it listens on the relay's address again after a
// cut, and ends a silence.
func (r *cutRelay) restore(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	listening := r.ln != nil
	if r.silent {
		r.silent = false
		for c := range r.conns {
			_ = c.Close()
		}
		clear(r.conns)
	}
	r.mu.Unlock()
	if !listening {
		r.listen(t)
	}
}

// listen listens on the relay's address again.
func (r *cutRelay) listen(t *testing.T) {
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
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 100)")
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

// TestLockServiceOutageAnsweredByTheWait: a guarded statement whose lock
// service refuses connections, or accepts them and never answers, is
// answered when its wait_timeout ends: no dial, retry, backoff or cleanup
// of the lock client runs on past the wait the statement was given, even
// with a per-call bound (OpTimeout) longer than the wait. The bound checked
// is generous (the wait plus 1.5 s); what it rules out is a call with a
// deadline of its own, longer than the caller's: the cleanup after a
// failed wait ran on a fresh 5 s bound and answered 3.2-5.5 s after
// the statement.
func TestLockServiceOutageAnsweredByTheWait(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 100)")
	const wait, margin = 2 * time.Second, 1500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		fault   func(*cutRelay)
		options func(addr string) redis.UniversalClient
	}{
		{"lockproxy's client/refused", (*cutRelay).cut, lockproxyClient},
		{"lockproxy's client/silent", (*cutRelay).silence, lockproxyClient},
		// go-redis's defaults retry a dial 5 times 100 ms apart, up to 3
		// times a call: the cleanup after a failed wait took its whole
		// fresh bound (1 s) past the wait.
		{"go-redis defaults/refused", (*cutRelay).cut, func(addr string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := newCutRelay(t, testbed.Get(t).RedisAddr)
			rdb := tc.options(relay.addr)
			t.Cleanup(func() { _ = rdb.Close() })
			// A per-call bound longer than the wait: it must bound only
			// calls made without the caller's deadline.
			locker := redislock.New(rdb, &redislock.Options{TTL: 3 * time.Second, OpTimeout: 5 * time.Second, Prefix: testbed.UniqueName(t)})
			p := startProxyWith(t, func(c *rules.Config) {
				c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
					Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(wait)}}
			}, locker)
			h := p.db(t, db, "")
			if _, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
				t.Fatalf("with Redis reachable: %v", err)
			}
			tc.fault(relay)
			defer relay.restore(t)
			began := time.Now()
			_, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
			took := time.Since(began)
			t.Logf("answered after %v", took)
			me := mysqlErr(t, err)
			if me.Number != 1205 || !strings.Contains(me.Message, "lock service unavailable during the wait") {
				t.Errorf("UPDATE with the lock service %s: %v, want lockproxy's 1205 naming the cause", tc.name, err)
			}
			if took > wait+margin {
				t.Errorf("answered %v after the statement, want by its %v wait (+%v): a lock-service call outlived the wait", took, wait, margin)
			}
		})
	}
}

// lockproxyClient is the client lockproxy builds for locks.redis.
func lockproxyClient(addr string) redis.UniversalClient {
	return redis.NewUniversalClient(redislock.ClientOptions([]string{addr}, "", false))
}

// TestLockServiceSlowerThanAFixedTimeout: a Redis whose every reply takes
// 700 ms (more than the client's own 500 ms read timeout), but answers
// within the statement's 5 s wait, is slow, not down: the guarded UPDATE
// takes its lock and runs.
func TestLockServiceSlowerThanAFixedTimeout(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 100)")
	relay := newCutRelay(t, testbed.Get(t).RedisAddr)
	relay.lag.Store(int64(700 * time.Millisecond))
	const wait = 5 * time.Second
	opts := redislock.ClientOptions([]string{relay.addr}, "", false)
	redislock.BoundByCallers(opts, 10*time.Second) // as lockproxy does: the longest of wait_timeout and ttl
	rdb := redis.NewUniversalClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	locker := redislock.New(rdb, &redislock.Options{TTL: 10 * time.Second, Prefix: testbed.UniqueName(t)})
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(wait)}}
	}, locker)
	h := p.db(t, db, "")
	if _, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatalf("UPDATE with the lock service answering in 700 ms, inside its %v wait: %v", wait, err)
	}
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	if stock != 99 {
		t.Errorf("stock %d, want 99", stock)
	}
}
