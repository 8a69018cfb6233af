package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// testProxy is a lockproxy Server serving on a free loopback port in front
// of the test bed's primary.
type testProxy struct {
	srv  *Server
	addr string
	bed  *testbed.Bed
	reg  *prometheus.Registry
}

// startProxy runs a proxy for the test; extra YAML is appended to the
// config (e.g. "rules: [...]"), and edit may change the loaded config.
func startProxy(t testing.TB, edit func(*rules.Config)) *testProxy {
	t.Helper()
	return startProxyWith(t, edit, nil)
}

// startProxyWith is startProxy with a lock backend (nil: none).
func startProxyWith(t testing.TB, edit func(*rules.Config), locker lockmgr.Locker) *testProxy {
	t.Helper()
	return startProxyOn(t, testbed.Get(t), edit, locker)
}

// startProxyOn runs a proxy in front of a given bed (e.g. a private one a
// test may break).
func startProxyOn(t testing.TB, bed *testbed.Bed, edit func(*rules.Config), locker lockmgr.Locker) *testProxy {
	t.Helper()
	return startProxyLogging(t, bed, edit, locker, zaptest.NewLogger(t))
}

// startProxyLogging is startProxyOn with the proxy's logger.
func startProxyLogging(t testing.TB, bed *testbed.Bed, edit func(*rules.Config), locker lockmgr.Locker, log *zap.Logger) *testProxy {
	t.Helper()
	yaml := fmt.Sprintf(`proxy:
  handshake_timeout: 5s
users:
  - user: %s
    password: %q
backends:
  primary: %s
locks:
  backend: memory
`, bed.User, bed.Password, bed.PrimaryAddr)
	cfg, err := rules.LoadBytes("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if edit != nil {
		edit(cfg)
	}
	reg := prometheus.NewRegistry()
	return serveProxy(t, bed, cfg, Options{Logger: log, Registry: reg, Locker: locker}, reg)
}

// serveProxy runs a Server for cfg on a free loopback port until the test
// ends; reg is the registry opts.Registry names.
func serveProxy(t testing.TB, bed *testbed.Bed, cfg *rules.Config, opts Options, reg *prometheus.Registry) *testProxy {
	t.Helper()
	srv, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testProxy{srv: srv, addr: ln.Addr().String(), bed: bed, reg: reg}
}

func testbedFor(t testing.TB) *testbed.Bed { return testbed.Get(t) }

// db opens a go-sql-driver/mysql handle through the proxy.
func (p *testProxy) db(t testing.TB, dbName, params string) *sql.DB {
	t.Helper()
	return openDB(t, p.bed.DSN(p.addr, dbName, params))
}

// direct opens a handle straight to the primary, bypassing the proxy.
func (p *testProxy) direct(t testing.TB, dbName, params string) *sql.DB {
	t.Helper()
	return openDB(t, p.bed.DSN(p.bed.PrimaryAddr, dbName, params))
}

func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("ping %s: %v", strings.SplitN(dsn, "@", 2)[1], err)
	}
	return db
}

// freshDB creates an empty database named for the test on the primary.
func freshDB(t testing.TB, p *testProxy) string {
	t.Helper()
	name := "t_" + strings.ToLower(strings.NewReplacer("/", "_", " ", "_", "-", "_").Replace(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	d := p.direct(t, "", "")
	testbed.MustExec(t, d, "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`")
	return name
}
