package etcdlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
)

// server is an etcd started by the tests on free loopback ports.
type server struct {
	dir, client, peer string
	cmd               *exec.Cmd
	log               *os.File
}

// shared is the server of the package's tests; nil (with why) when etcd
// is not installed outside CI.
var (
	shared     *server
	sharedSkip string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "etcdlock: etcd not installed (apt-get install etcd-server):", err)
			return 1
		}
		sharedSkip = "etcd not installed (apt-get install etcd-server)"
		return m.Run()
	}
	dir, err := os.MkdirTemp(tmpRoot(), "etcdlock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := startServer(filepath.Join(dir, "shared"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock: start etcd:", err)
		return 1
	}
	defer s.stop()
	shared = s
	return m.Run()
}

// getServer returns the shared server or skips (outside CI only).
func getServer(t testing.TB) *server {
	t.Helper()
	if shared == nil {
		t.Skip(sharedSkip)
	}
	return shared
}

// tmpRoot is where servers keep their data: memory if the machine has
// /dev/shm, so that etcd's fsync per write does not make the tests slow.
func tmpRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer starts etcd with its data under dir and waits until it
// answers.
func startServer(dir string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, client: c, peer: p}
	return s, s.start()
}

func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cu, pu := "http://"+s.client, "http://"+s.peer
	s.cmd = exec.Command("etcd", "--name", "default", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "default="+pu)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.log = log
	if err := s.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	cli, err := clientv3.New(etcdlock.ClientConfig([]string{s.client}))
	if err != nil {
		s.stop()
		return err
	}
	defer cli.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return fmt.Errorf("etcd on %s did not answer: %w (log in %s)", s.client, err, s.dir)
}

// stop ends the server (SIGTERM, then SIGKILL) and waits for it.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.log.Close()
	s.cmd = nil
}

// restart stops and starts the server on the same ports and data.
func (s *server) restart() error {
	s.stop()
	return s.start()
}

func (s *server) newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(etcdlock.ClientConfig([]string{s.client}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
