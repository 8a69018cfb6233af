package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// TestReloadUnderLoad swaps configurations (rules on and off, replicas on
// and off, client TLS on and off) while sessions read, write under locks
// and log in: under -race this shows sessions never read a half-swapped
// configuration, and the load sees no error a reload should not cause.
func TestReloadUnderLoad(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 1000000), (2, 1000000)")
	bed := testbedFor(t)
	variant := func(i int) func(*rules.Config) {
		return func(c *rules.Config) {
			c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
				Lock: []string{rules.LockWrite, rules.LockLockingRead}, OnUnkeyed: rules.OnUnkeyedReject,
				WaitTimeout: rules.Duration(5 * time.Second)}}
			if i%2 == 1 {
				c.Backends.Replicas = []string{bed.ReplicaAddr}
				c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
			}
			if i%3 == 1 && bed.TLSCert != "" {
				c.Proxy.TLS = &rules.TLSConfig{Cert: bed.TLSCert, Key: bed.TLSKey}
			}
		}
	}
	p := startProxyWith(t, variant(0), memlock.New(nil, nil))
	configs := make([]*rules.Config, 6)
	for i := range configs {
		c := *p.srv.config()
		variant(i)(&c)
		configs[i] = &c
	}

	// The load runs for as long as the reloads take, however busy the
	// machine: a fixed time would give a slow host fewer reloads.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	work := func(f func(*sql.DB) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.db(t, db, "")
			for ctx.Err() == nil {
				if err := f(c); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 3 {
		work(func(c *sql.DB) error {
			_, err := c.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
			return err
		})
		work(func(c *sql.DB) error {
			var n int
			return c.QueryRow("SELECT stock FROM sku WHERE sku_id = 2").Scan(&n)
		})
	}
	work(func(c *sql.DB) error { // new logins, each on a fresh connection
		conn, err := c.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		return conn.Raw(func(any) error { return nil })
	})
	for reload := range 4 * len(configs) {
		if err := p.srv.Reload(configs[reload%len(configs)]); err != nil {
			t.Fatalf("reload %d: %v", reload, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("load during reloads: %v", err)
		}
	}
}

// TestShutdownBeforeServe: a Serve that starts after Shutdown has begun
// (a SIGTERM at start-up, a test's cleanup racing the goroutine that
// serves) returns at once and closes its listener, rather than accepting
// forever past a shutdown that found no listener to close.
func TestShutdownBeforeServe(t *testing.T) {
	bed := testbed.Get(t)
	cfg, err := rules.LoadBytes("test.yaml", []byte(fmt.Sprintf("users: [{user: %s, password: %q}]\nbackends: {primary: %q}\nlocks: {backend: memory}\n",
		bed.User, bed.Password, bed.PrimaryAddr)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, Options{Logger: zaptest.NewLogger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with nothing served: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		_ = ln.Close()
		t.Fatal("Serve after Shutdown still accepts")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second); err == nil {
		c.Close()
		t.Fatal("Serve after Shutdown left its listener open")
	}
}

// TestShutdownWakesBackendWaits: when the shutdown grace ends, a session
// waiting for its primary's reply (a long statement) is woken too, and
// Shutdown returns rather than waiting for the statement.
func TestShutdownWakesBackendWaits(t *testing.T) {
	p := startProxy(t, nil)
	c := p.db(t, "", "")
	tx, err := c.Begin() // in a transaction: draining lets it run to the grace
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	running := make(chan error, 1)
	go func() {
		_, err := tx.Exec("SELECT SLEEP(120)")
		running <- err
	}()
	time.Sleep(300 * time.Millisecond) // the statement reaches MariaDB
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() { returned <- p.srv.Shutdown(ctx) }()
	select {
	case err := <-returned:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown after its grace: %v, want the context's deadline", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Shutdown still waits for a statement its grace has run out on")
	}
	select {
	case err := <-running:
		if err == nil {
			t.Fatal("the 120 s statement answered as if it ran to its end")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session waiting for its primary was not woken")
	}
}

// TestShutdownWakesReplicaReads: when the shutdown grace ends, a session
// whose read a replica is serving (outside a transaction, so draining
// lets it run) is woken as one waiting for its primary is: every session
// has ended when Shutdown returns.
func TestShutdownWakesReplicaReads(t *testing.T) {
	p := routedProxy(t)
	waitReplica(t, p)
	c := p.db(t, "", "")
	running := make(chan error, 1)
	const q = "SELECT SLEEP(120), @@server_id"
	go func() {
		_, err := c.Exec(q)
		running <- err
	}()
	onReplica := p.bed.Open(t, p.bed.ReplicaAddr, "")
	for n := 0; n == 0; time.Sleep(20 * time.Millisecond) {
		if err := onReplica.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", q).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := p.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown after its grace: %v, want the context's deadline", err)
	}
	p.srv.mu.Lock()
	left := len(p.srv.sessions)
	p.srv.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sessions still running when Shutdown returned", left)
	}
	select {
	case err := <-running:
		if err == nil {
			t.Fatal("the 120 s read answered as if it ran to its end")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the client's read still waits after Shutdown returned")
	}
}
