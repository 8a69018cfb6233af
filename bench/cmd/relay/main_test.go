package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveEach is a loopback server that runs handle on each connection it
// accepts, in a goroutine of its own, and closes it after.
func serveEach(t *testing.T, handle func(c net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln
}

// upstream is a loopback server that answers every line with "echo: "
// and the line, and closes the connection when it reads "bye".
func upstream(t *testing.T) net.Listener {
	t.Helper()
	return serveEach(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "bye\n" {
				return
			}
			if _, err := io.WriteString(c, "echo: "+line); err != nil {
				return
			}
		}
	})
}

// startRelay serves a relay to target on a free loopback port.
func startRelay(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = serve(ln, target, nil, log.New(io.Discard, "", 0)) }()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestRelaysBothWays(t *testing.T) {
	addr := startRelay(t, upstream(t).Addr().String())
	c := dial(t, addr)
	r := bufio.NewReader(c)
	// Several exchanges on one connection, one of them larger than a
	// socket buffer, so both directions carry more than one write.
	big := strings.Repeat("x", 1<<20)
	for _, msg := range []string{"hello", big, "again"} {
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read reply to %d bytes: %v", len(msg), err)
		}
		if got != "echo: "+msg+"\n" {
			t.Fatalf("reply to %d bytes is %d bytes, want %d", len(msg), len(got), len(msg)+7)
		}
	}
}

func TestClosesClientWhenUpstreamEnds(t *testing.T) {
	addr := startRelay(t, upstream(t).Addr().String())
	c := dial(t, addr)
	if _, err := io.WriteString(c, "bye\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the upstream closed = %v, want EOF", err)
	}
}

func TestClosesUpstreamWhenClientEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c := dial(t, startRelay(t, ln.Addr().String()))
	var up net.Conn
	select {
	case up = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never dialled the upstream")
	}
	defer up.Close()
	_ = c.Close()
	_ = up.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := up.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("upstream read after the client closed = %v, want EOF", err)
	}
}

func TestUnreachableTargetClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	c := dial(t, startRelay(t, dead))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a relay whose target refuses succeeded")
	}
}

func TestRunNeedsTarget(t *testing.T) {
	if err := run([]string{"-listen", "127.0.0.1:0"}, io.Discard); err == nil {
		t.Fatal("run without -to succeeded")
	}
}

// TestProcess builds the command and runs it as the bench does: it reads
// the announced address, relays through it and stops it with SIGTERM.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the relay")
	}
	bin := filepath.Join(t.TempDir(), "relay")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-to", upstream(t).Addr().String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no address announced: %v; stderr: %s", err, stderr.String())
	}
	c := dial(t, strings.TrimSpace(addr))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "echo: ping\n" {
		t.Fatalf("reply = %q, %v", got, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("relay exited with %v after SIGTERM; stderr: %s", err, stderr.String())
	}
}
