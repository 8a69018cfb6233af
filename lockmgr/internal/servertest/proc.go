package servertest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// TmpRoot is where servers keep their data: memory if the machine has
// /dev/shm, so that a server's fsync per write does not make tests slow.
func TmpRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// FreePort returns a loopback "host:port" nothing listens on right now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Proc is one server process a test binary runs in its own process group,
// its output appended to Dir/Log. Set the fields, then Start; not safe for
// concurrent use.
type Proc struct {
	// Dir holds the server's data and log.
	Dir string
	// Log is the log file's name in Dir.
	Log string
	// Name says which server it is in errors ("etcd on 127.0.0.1:2379").
	Name string
	// Command makes the command that runs the server (called per start).
	Command func() *exec.Cmd
	// Ready returns nil once the server answers.
	Ready func() error
	// Wait is how long Start waits for Ready; Poll the pause between tries.
	Wait, Poll time.Duration

	cmd *exec.Cmd
	log *os.File
}

// Start runs the server and waits until Ready succeeds; if it does not
// within Wait, it stops the server and says why.
func (p *Proc) Start() error {
	log, err := os.OpenFile(filepath.Join(p.Dir, p.Log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = p.Command()
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.log = log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	var lastErr error
	for deadline := time.Now().Add(p.Wait); time.Now().Before(deadline); time.Sleep(p.Poll) {
		if lastErr = p.Ready(); lastErr == nil {
			return nil
		}
	}
	p.Stop()
	return fmt.Errorf("%s did not answer: %w (log in %s)", p.Name, lastErr, p.Dir)
}

// Stop ends the server (SIGTERM, then SIGKILL after 10s) and waits for it.
// Stopping a stopped server does nothing.
func (p *Proc) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
	p.cmd = nil
}

// Restart stops and starts the server on the same ports and data.
func (p *Proc) Restart() error {
	p.Stop()
	return p.Start()
}
