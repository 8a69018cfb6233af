package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The lock services below are started by the test itself, one per test, on
// free loopback ports, and stopped when the test ends. Under CI=true a
// missing program fails the test; elsewhere it skips it.

// zkJar is Debian's ZooKeeper server (package zookeeper); its manifest
// names the other jars it needs.
const zkJar = "/usr/share/java/zookeeper.jar"

// lockServer is one lock-service process this test binary started.
type lockServer struct {
	name, addr, log string
	cmd             *exec.Cmd
	exited          chan struct{} // closed once cmd.Wait has returned
}

// needProgram fails t under CI=true and skips it elsewhere when a program
// a lock service needs is missing.
func needProgram(t testing.TB, install string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%v (apt-get install %s, or scripts/testbed.sh install)", err, install)
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s; CI=%s: a missing lock service is a failure", msg, os.Getenv("CI"))
	}
	t.Skip(msg)
}

// dataDir is a directory for one server's data, removed when t ends: in
// memory when the machine has /dev/shm, so that etcd's fsync per write
// does not make the sale slow on a busy disk; under t.TempDir() otherwise.
func dataDir(t testing.TB, name string) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "lockproxy-e2e-"+name+"-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return filepath.Join(t.TempDir(), name)
}

// launch starts the server's command with its output in dir/<name>.log,
// waits until ready answers, and stops the process when t ends.
func launch(t testing.TB, s *lockServer, dir string, ready func(ctx context.Context) error) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.log = filepath.Join(dir, s.name+".log")
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start %s: %v", s.name, err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.stop()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(s.log)
			t.Logf("%s %s log:\n%s", s.name, s.addr, tail(string(b), 30))
		}
	})
	if err := waitReady(s, ready, 90*time.Second); err != nil {
		b, _ := os.ReadFile(s.log)
		t.Fatalf("%s on %s did not answer: %v\n%s", s.name, s.addr, err, tail(string(b), 30))
	}
}

// waitReady polls ready until it succeeds, the process exits or d passes.
func waitReady(s *lockServer, ready func(ctx context.Context) error, d time.Duration) error {
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = ready(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited: %w", s.name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

// stop ends the process group the server leads (SIGTERM, SIGKILL after
// 10s) and waits for it. Safe to call twice.
func (s *lockServer) stop() {
	pgid := s.cmd.Process.Pid
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exited
	}
}

// startEtcd starts a single-member etcd and returns its client address.
func startEtcd(t testing.TB) string {
	t.Helper()
	_, err := exec.LookPath("etcd")
	needProgram(t, "etcd-server", err)
	dir := dataDir(t, "etcd")
	client, peer := freePort(t), freePort(t)
	cu, pu := "http://"+client, "http://"+peer
	s := &lockServer{name: "etcd", addr: client, cmd: exec.Command("etcd",
		"--name", "e2e", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "e2e="+pu)}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	launch(t, s, dir, func(ctx context.Context) error {
		_, err := cli.Put(ctx, "e2e-ready", "1")
		return err
	})
	return client
}

// startZooKeeper starts a standalone ZooKeeper and returns its address.
// tickTime is 500ms, so sessions may last 1s to 10s.
func startZooKeeper(t testing.TB) string {
	t.Helper()
	_, jerr := exec.LookPath("java")
	_, zerr := os.Stat(zkJar)
	needProgram(t, "zookeeper default-jre-headless", errors.Join(jerr, zerr))
	dir := dataDir(t, "zookeeper")
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\nmaxClientCnxns=0\nforceSync=no\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &lockServer{name: "zookeeper", addr: addr, cmd: exec.Command("java",
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.admin.enableServer=false", "-Dznode.container.checkIntervalMs=1000",
		"-cp", zkJar, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))}
	launch(t, s, dir, func(ctx context.Context) error { return zkPing(ctx, addr) })
	return addr
}

// zkPing opens a session and reads "/".
func zkPing(ctx context.Context, addr string) error {
	c, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return err
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, _, err := c.Exists("/"); done <- err }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...interface{}) {}

// startRedises starts n independent redis-servers without persistence and
// returns their addresses.
func startRedises(t testing.TB, n int) []string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	needProgram(t, "redis-server", err)
	var out []string
	for i := range n {
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		dir := filepath.Join(t.TempDir(), "redis-"+port)
		s := &lockServer{name: fmt.Sprintf("redis-%d", i), addr: addr, cmd: exec.Command(bin,
			"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir)}
		c := redis.NewClient(&redis.Options{Addr: addr})
		launch(t, s, dir, func(ctx context.Context) error { return c.Ping(ctx).Err() })
		_ = c.Close()
		out = append(out, addr)
	}
	return out
}
