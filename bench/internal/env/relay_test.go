package env

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with the same line, on a free loopback port.
func echoServer(t *testing.T) string {
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
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRelays starts both relays in front of an echo server, sends a line
// through each, and stops them.
func TestRelays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the relay")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := BuildRelay(ctx, root, work)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Root: root, RelayBinary: bin, WorkDir: work}
	target := echoServer(t)
	for _, kind := range []string{GoRelay, Socat} {
		t.Run(kind, func(t *testing.T) {
			r, err := e.StartRelay(ctx, kind, target)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Stop(context.Background())
			if r.Addr == target || r.PID <= 0 || r.Kind != kind {
				t.Fatalf("relay = %+v", r)
			}
			c, err := net.DialTimeout("tcp", r.Addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, "through "+kind+"\n"); err != nil {
				t.Fatal(err)
			}
			got, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || got != "through "+kind+"\n" {
				t.Fatalf("echo through %s = %q, %v", kind, got, err)
			}
			if _, err := r.CPUTime(); err != nil {
				t.Fatal(err)
			}
			if err := r.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if !r.Exited() {
				t.Fatal("relay still running after Stop")
			}
		})
	}
}

func TestSocatMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartSocat(context.Background(), t.TempDir(), "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "socat is not installed") {
		t.Fatalf("StartSocat without socat = %v", err)
	}
}

func TestStartRelayNeedsBinary(t *testing.T) {
	e := &Env{WorkDir: t.TempDir()}
	if _, err := e.StartRelay(context.Background(), GoRelay, "127.0.0.1:1"); err == nil {
		t.Fatal("StartRelay without a built relay succeeded")
	}
	if _, err := e.StartRelay(context.Background(), "nginx", "127.0.0.1:1"); err == nil {
		t.Fatal("StartRelay of an unknown kind succeeded")
	}
}
