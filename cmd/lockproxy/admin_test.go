package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestAdminToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	h := requireToken("s3cret", ok)
	for _, c := range []struct {
		path, auth string
		code       int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "Bearer wrong", http.StatusUnauthorized},
		{"/debug/locks", "Bearer s3cret", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("%s with %q: %d, want %d", c.path, c.auth, rec.Code, c.code)
		}
	}
}

func TestWarnIfReadable(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, body string
		mode       os.FileMode
		env        string
		warn       bool
	}{
		{"literal password, world-readable", "users: [{user: app, password: hunter2}]\n", 0o644, "", true},
		{"literal password, owner only", "users: [{user: app, password: hunter2}]\n", 0o600, "", false},
		{"password from the environment", "users:\n  - user: app\n    password: ${PW}\n", 0o644, "hunter2", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("PW", c.env)
			}
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
			body := c.body + "backends: {primary: 127.0.0.1:3306}\n"
			if err := os.WriteFile(path, []byte(body), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			cfg, err := rules.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			warnIfReadable(path, cfg, zap.New(core))
			if got := logs.Len() > 0; got != c.warn {
				t.Fatalf("warned %v, want %v", got, c.warn)
			}
			for _, e := range logs.All() {
				if strings.Contains(e.Message, "hunter2") {
					t.Fatal("the warning shows the password")
				}
			}
		})
	}
}

// TestReadyz: /readyz answers 200 while the primary accepts connections and
// the lock service answers, and 503 naming the culprit when either does
// not. (Readiness is reachability: a listener stands for the primary.)
func TestReadyz(t *testing.T) {
	primary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	go func() {
		for {
			c, err := primary.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	cfg, err := rules.LoadBytes("t.yaml", []byte("users: [{user: app, password: x}]\nbackends: {primary: "+primary.Addr().String()+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	var lockErr error
	hs, err := startAdmin("127.0.0.1:0", "", srv, func(context.Context) error { return lockErr }, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		hs.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("all reachable: %d %s", code, body)
	}
	lockErr = errors.New("redis: connection refused")
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "lock service") {
		t.Errorf("lock service down: %d %s", code, body)
	}
	lockErr = nil
	_ = primary.Close()
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "primary") {
		t.Errorf("primary down: %d %s", code, body)
	}
}
