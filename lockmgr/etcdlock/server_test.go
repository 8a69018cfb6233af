package etcdlock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
)

// server is an etcd started by the tests on free loopback ports.
type server struct {
	client string
	*servertest.Proc
}

// shared is the server of the package's tests; Get skips when etcd is not
// installed outside CI.
var shared servertest.Shared[*server]

func TestMain(m *testing.M) {
	_, missing := exec.LookPath("etcd")
	os.Exit(shared.Main(m, servertest.Setup[*server]{
		Pkg: "etcdlock", Missing: missing, Hint: "etcd not installed (apt-get install etcd-server)",
		What: "etcd", DirPrefix: "etcdlock-test-",
		Start: func(dir string) (*server, error) { return startServer(filepath.Join(dir, "shared")) },
		Stop:  func(s *server) { s.Stop() },
	}))
}

// getServer returns the shared server or skips (outside CI only).
func getServer(t testing.TB) *server { t.Helper(); return shared.Get(t) }

func freePort() (string, error) { return servertest.FreePort() }

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
	cu, pu := "http://"+c, "http://"+p
	s := &server{client: c, Proc: &servertest.Proc{
		Dir: dir, Log: "etcd.log", Name: "etcd on " + c, Wait: 30 * time.Second, Poll: 100 * time.Millisecond,
		Command: func() *exec.Cmd {
			return exec.Command("etcd", "--name", "default", "--data-dir", filepath.Join(dir, "data"),
				"--listen-client-urls", cu, "--advertise-client-urls", cu,
				"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
				"--initial-cluster", "default="+pu)
		},
		Ready: func() error { return ping(c) },
	}}
	return s, s.Start()
}

// ping reads a key from the etcd at client.
func ping(client string) error {
	cli, err := clientv3.New(etcdlock.ClientConfig([]string{client}))
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "health")
	return err
}

// stop ends the server and waits for it.
func (s *server) stop() { s.Stop() }

// restart stops and starts the server on the same ports and data.
func (s *server) restart() error { return s.Restart() }

func (s *server) newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(etcdlock.ClientConfig([]string{s.client}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
