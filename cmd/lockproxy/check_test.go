package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCheckAsksTheLockService: --check validates the file and then asks
// the lock service it names whether it would serve locks, as /readyz
// does: a Redis that may evict lock keys, or one that does not answer, is
// a warning (the file is still valid: exit 0); a Redis that keeps every
// key gives none.
func TestCheckAsksTheLockService(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found (scripts/testbed.sh install installs it)")
	}
	dir := t.TempDir()
	evicting := startPlainRedis(t, bin, dir, "evicting", "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	keeping := startPlainRedis(t, bin, dir, "keeping", "--maxmemory", "100mb", "--maxmemory-policy", "noeviction")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	_ = ln.Close()
	for _, c := range []struct {
		name, addr string
		warn       []string // "": no warning
	}{
		{"evicting", evicting, []string{"warning: lock service (redis) not ready", "maxmemory-policy allkeys-lru", "noeviction"}},
		{"keeping", keeping, nil},
		{"unreachable", nobody, []string{"warning: lock service (redis) not ready"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, "users: [{user: app, password: x}]\nbackends: {primary: \"127.0.0.1:1\"}\n"+
				"locks:\n  backend: redis\n  redis:\n    addrs: [\""+c.addr+"\"]\n")
			var out, errb bytes.Buffer
			if code := run([]string{"--check", "--config", path}, &out, &errb); code != 0 {
				t.Fatalf("exit %d, want 0\n%s%s", code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), ": ok") {
				t.Errorf("stdout lacks ok:\n%s", out.String())
			}
			if c.warn == nil && strings.Contains(out.String(), "warning") {
				t.Errorf("a warning for a Redis that keeps every key:\n%s", out.String())
			}
			for _, w := range c.warn {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// startPlainRedis starts a private Redis with args on a free loopback port
// and returns its address.
func startPlainRedis(t *testing.T, bin, dir, name string, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, args...)...)
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = out.Close() })
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("redis %s did not start:\n%s", name, strings.TrimSpace(string(log)))
		}
	}
}
