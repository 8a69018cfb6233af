package redlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one redis-server this test binary started on a free loopback
// port, with no persistence.
type server struct {
	addr    string
	pidfile string
	bin     string
	dir     string
	port    int
}

// startServers starts n independent redis-servers in dir. A missing
// redis-server is reported by the error; callers fail under CI=true.
func startServers(dir string, n int) ([]*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not installed: %w", err)
	}
	var out []*server
	for range n {
		port, err := freePort()
		if err != nil {
			stopServers(out)
			return nil, err
		}
		s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), bin: bin, dir: dir, port: port,
			pidfile: filepath.Join(dir, fmt.Sprintf("redis-%d.pid", port))}
		out = append(out, s)
		if err := s.start(); err != nil {
			stopServers(out)
			return nil, err
		}
	}
	return out, nil
}

// start runs the server (again, empty) and waits until it answers.
func (s *server) start() error {
	p := strconv.Itoa(s.port)
	cmd := exec.Command(s.bin, "--port", p, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--daemonize", "yes", "--pidfile", s.pidfile, "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis-"+p+".log"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start redis-server: %v: %s", err, b)
	}
	return s.waitUp()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *server) waitUp() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	var err error
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("redis-server %s not up: %w", s.addr, err)
}

// kill stops the server at once (SIGKILL), as a crash would.
func (s *server) kill() error {
	b, err := os.ReadFile(s.pidfile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	for range 200 { // until the port is closed
		conn, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err != nil {
			return nil
		}
		conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server %s still answers after SIGKILL", s.addr)
}

func stopServers(ss []*server) {
	for _, s := range ss {
		_ = s.kill()
	}
}

func addrs(ss []*server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.addr
	}
	return out
}

// servers starts n servers for t alone, stopped when t ends; it fails
// under CI=true and skips otherwise when redis-server is missing.
func servers(t testing.TB, n int) []*server {
	t.Helper()
	ss, err := startServers(t.TempDir(), n)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { stopServers(ss) })
	return ss
}
