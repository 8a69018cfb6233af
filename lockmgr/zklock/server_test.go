package zklock_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkJar is Debian's ZooKeeper server (package zookeeper); its manifest
// names the other jars it needs.
const zkJar = "/usr/share/java/zookeeper.jar"

// server is a standalone ZooKeeper started by the tests on a free loopback
// port.
type server struct {
	dir, addr string
	cmd       *exec.Cmd
	log       *os.File
}

var (
	shared     *server
	sharedSkip string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	_, jerr := exec.LookPath("java")
	_, zerr := os.Stat(zkJar)
	if jerr != nil || zerr != nil {
		msg := "ZooKeeper not installed (apt-get install zookeeper default-jre-headless)"
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "zklock:", msg, jerr, zerr)
			return 1
		}
		sharedSkip = msg
		return m.Run()
	}
	dir, err := os.MkdirTemp(tmpRoot(), "zklock-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := startServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zklock: start ZooKeeper:", err)
		return 1
	}
	defer s.stop()
	shared = s
	return m.Run()
}

func getServer(t testing.TB) *server {
	t.Helper()
	if shared == nil {
		t.Skip(sharedSkip)
	}
	return shared
}

// tmpRoot is where servers keep their data: memory if the machine has
// /dev/shm.
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

// startServer writes a zoo.cfg under dir (tickTime 500ms: sessions of 1s
// to 10s) and starts ZooKeeper, waiting until it answers.
func startServer(dir string) (*server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\nmaxClientCnxns=0\nforceSync=no\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	s := &server{dir: dir, addr: addr}
	return s, s.start()
}

func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.cmd = exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
		"-Dznode.container.checkIntervalMs=1000", "-cp", zkJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.log = log
	if err := s.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if lastErr = ping(s.addr); lastErr == nil {
			return nil
		}
	}
	s.stop()
	return fmt.Errorf("ZooKeeper on %s did not answer: %w (log in %s)", s.addr, lastErr, s.dir)
}

// ping opens a session and reads "/".
func ping(addr string) error {
	c, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		return err
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, _, err := c.Exists("/"); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		return fmt.Errorf("no answer")
	}
}

type quiet struct{}

func (quiet) Printf(string, ...interface{}) {}

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

// restart stops and starts the server on the same port and data.
func (s *server) restart() error {
	s.stop()
	return s.start()
}
