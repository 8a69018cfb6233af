package zklock_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
)

// zkJar is Debian's ZooKeeper server (package zookeeper); its manifest
// names the other jars it needs.
const zkJar = "/usr/share/java/zookeeper.jar"

// server is a standalone ZooKeeper started by the tests on a free loopback
// port.
type server struct {
	addr string
	*servertest.Proc
}

// shared is the server of the package's tests; Get skips when ZooKeeper is
// not installed outside CI.
var shared servertest.Shared[*server]

func TestMain(m *testing.M) {
	_, jerr := exec.LookPath("java")
	_, zerr := os.Stat(zkJar)
	os.Exit(shared.Main(m, servertest.Setup[*server]{
		Pkg: "zklock", Missing: errors.Join(jerr, zerr),
		Hint: "ZooKeeper not installed (apt-get install zookeeper default-jre-headless)",
		What: "ZooKeeper", DirPrefix: "zklock-test-",
		Start: startServer,
		Stop:  func(s *server) { s.Stop() },
	}))
}

// getServer returns the shared server or skips (outside CI only).
func getServer(t testing.TB) *server { t.Helper(); return shared.Get(t) }

func freePort() (string, error) { return servertest.FreePort() }

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
	s := &server{addr: addr, Proc: &servertest.Proc{
		Dir: dir, Log: "zookeeper.log", Name: "ZooKeeper on " + addr, Wait: 60 * time.Second, Poll: 200 * time.Millisecond,
		Command: func() *exec.Cmd {
			return exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
				"-Dznode.container.checkIntervalMs=1000", "-cp", zkJar,
				"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
		},
		Ready: func() error { return ping(addr) },
	}}
	return s, s.Start()
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

// stop ends the server and waits for it.
func (s *server) stop() { s.Stop() }

// restart stops and starts the server on the same port and data.
func (s *server) restart() error { return s.Restart() }
