package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// binary is the lockproxy built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(withBinary(m)))
}

// withBinary builds cmd/lockproxy before the tests run.
func withBinary(m *testing.M) *testing.M {
	dir, err := os.MkdirTemp("", "lockproxy-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "lockproxy")
	cmd := exec.Command("go", "build", "-race", "-o", binary, "../cmd/lockproxy")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lockproxy:", err)
		os.Exit(1)
	}
	return m
}

// instance is one running lockproxy process.
type instance struct {
	cmd   *exec.Cmd
	addr  string
	admin string
	log   string
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// config renders a rules.yaml for the bed with the given locks and rules
// sections (YAML, indented as top-level blocks).
func config(bed *testbed.Bed, listen, admin, locks, rulesYAML string) string {
	return fmt.Sprintf(`proxy:
  listen: %s
  shutdown_grace: 2s
admin:
  listen: %s
users:
  - user: %s
    password: %q
backends:
  primary: %s
%s
%s
`, listen, admin, bed.User, bed.Password, bed.PrimaryAddr, locks, rulesYAML)
}

// redisLocks is a locks section on the bed's Redis.
func redisLocks(bed *testbed.Bed, ttl, wait string) string {
	return fmt.Sprintf(`locks:
  backend: redis
  redis:
    addrs: [%s]
  ttl: %s
  wait_timeout: %s
`, bed.RedisAddr, ttl, wait)
}

// start runs lockproxy with the config and waits until it serves. The
// ports come from freePort, so another process may take one before
// lockproxy binds it: such a start is tried again on new ports.
func start(t testing.TB, bed *testbed.Bed, locks, rulesYAML string) *instance {
	t.Helper()
	for attempt := 1; ; attempt++ {
		in, taken := startOnce(t, bed, locks, rulesYAML)
		if !taken {
			return in
		}
		if attempt == 3 {
			t.Fatalf("lockproxy did not start: its ports were taken in %d tries", attempt)
		}
	}
}

// startOnce is one try of start; taken reports that lockproxy stopped
// because a port it was given was in use.
func startOnce(t testing.TB, bed *testbed.Bed, locks, rulesYAML string) (in *instance, taken bool) {
	t.Helper()
	dir := t.TempDir()
	in = &instance{addr: freePort(t), admin: freePort(t), log: filepath.Join(dir, "lockproxy.log")}
	cfg := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfg, []byte(config(bed, in.addr, in.admin, locks, rulesYAML)), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(in.log)
	if err != nil {
		t.Fatal(err)
	}
	in.cmd = exec.Command(binary, "--config", cfg, "--log-format", "console")
	in.cmd.Stdout, in.cmd.Stderr = logf, logf
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The cleanup keeps its own reference: the try that found a port
	// taken returns in as nil.
	started := in
	t.Cleanup(func() {
		started.stop()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(started.log)
			t.Logf("lockproxy %s log:\n%s", started.addr, tail(string(b), 60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = testbed.AwaitAdmin(ctx, in.admin, "/healthz", func() (bool, error) {
		b, _ := os.ReadFile(in.log)
		return strings.Contains(string(b), "bind: address already in use"), errPortTaken
	})
	switch {
	case errors.Is(err, errPortTaken):
		t.Logf("lockproxy %s: a port was taken before it bound it; trying other ports", in.addr)
		in.stop()
		return nil, true
	case err != nil:
		b, _ := os.ReadFile(in.log)
		t.Fatalf("lockproxy did not start: %v\n%s", err, b)
	}
	return in, false
}

// errPortTaken: lockproxy could not bind a port it was given.
var errPortTaken = errors.New("a port was taken")

// stop sends SIGTERM and waits (SIGKILL after 10s). Safe to call twice.
func (in *instance) stop() {
	if in.cmd.ProcessState != nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = in.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = in.cmd.Process.Kill()
		<-done
	}
}

// kill sends SIGKILL, as a crash would.
func (in *instance) kill() {
	_ = in.cmd.Process.Kill()
	_ = in.cmd.Wait()
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// open returns a database handle for addr.
func open(t testing.TB, bed *testbed.Bed, addr, db, params string, maxConns int) *sql.DB {
	t.Helper()
	h, err := sql.Open("mysql", bed.DSN(addr, db, params))
	if err != nil {
		t.Fatal(err)
	}
	h.SetMaxOpenConns(maxConns)
	h.SetMaxIdleConns(maxConns)
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	return h
}

// freshDB creates an empty database for the test, directly on the primary.
func freshDB(t testing.TB, bed *testbed.Bed, name string) *sql.DB {
	t.Helper()
	d := open(t, bed, bed.PrimaryAddr, "", "", 2)
	for _, s := range []string{"DROP DATABASE IF EXISTS `" + name + "`", "CREATE DATABASE `" + name + "`"} {
		if _, err := d.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	return open(t, bed, bed.PrimaryAddr, name, "", 4)
}
