package rules

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testEnv is the environment the config tests load with.
func testEnv(k string) (string, bool) {
	v, ok := map[string]string{
		"APP_DB_PASSWORD": "pw#1: x",
		"APP_USER":        "app",
		"APP_PASSWORD":    "s3cret # with hash",
		"REPLICA":         "127.0.0.1:3316",
		"DB_PORT":         "",
		"DB_HOST":         "",
	}[k]
	return v, ok
}

// TestLoadGolden loads every testdata/config/*.yaml and compares the result
// (the redacted config, or every problem) with its .golden file.
func TestLoadGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := load(filepath.Base(f), mustRead(t, f), testEnv, "testdata/config")
			var got string
			switch {
			case err != nil:
				var ve *ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("error %v is not a *ValidationError wrapping ErrInvalidConfig", err)
				}
				got = "ERROR\n" + err.Error() + "\n"
			case cfg == nil:
				t.Fatal("nil config and nil error")
			default:
				got = "OK\n" + cfg.String()
			}
			if strings.HasPrefix(filepath.Base(f), "bad_") != (err != nil) {
				t.Errorf("bad_ files must fail and others load; got err=%v", err)
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden", got)
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./rules -run %s -update)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("mismatch with %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestLoadDefaults(t *testing.T) {
	cfg, err := load("min.yaml", []byte("users: [{user: app}]\nbackends: {primary: 10.0.0.1:3306}\nrules: [{name: r, table: t, key: [id]}]\n"), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"proxy.listen", cfg.Proxy.Listen, "127.0.0.1:3307"},
		{"max_connections", cfg.Proxy.MaxConnections, 4096},
		{"handshake_timeout", cfg.Proxy.HandshakeTimeout.D(), 10 * time.Second},
		{"shutdown_grace", cfg.Proxy.ShutdownGrace.D(), 30 * time.Second},
		{"max_allowed_packet", cfg.Proxy.MaxAllowedPacket, Size(64 << 20)},
		{"admin.listen", cfg.Admin.Listen, "127.0.0.1:9307"},
		{"max_replica_lag", cfg.Backends.MaxReplicaLag.D(), 2 * time.Second},
		{"locks.backend", cfg.Locks.Backend, "memory"},
		{"locks.ttl", cfg.Locks.TTL.D(), 30 * time.Second},
		{"locks.wait_timeout", cfg.Locks.WaitTimeout.D(), 5 * time.Second},
		{"on_unavailable", cfg.Locks.OnUnavailable, "reject"},
		{"rule lock", strings.Join(cfg.Rules[0].Lock, ","), "write,locking_read,read_in_txn"},
		{"rule on_unkeyed", cfg.Rules[0].OnUnkeyed, "reject"},
		{"rule wait", cfg.Rules[0].EffectiveWaitTimeout(cfg.Locks), 5 * time.Second},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func TestExpandEnv(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "x", "EMPTY": "", "B": "${A}"}[k]
		return v, ok
	}
	tests := []struct {
		in, want, err string
	}{
		{"plain", "plain", ""},
		{"${A}", "x", ""},
		{"pre-${A}-post", "pre-x-post", ""},
		{"${B}", "${A}", ""}, // values are not expanded again
		{"${MISSING:-def}", "def", ""},
		{"${EMPTY:-def}", "def", ""},
		{"${EMPTY}", "", ""},
		{"${MISSING:-}", "", ""},
		{"$$A", "$A", ""},
		{"cost $5", "cost $5", ""},
		{"trailing $", "trailing $", ""},
		{"${MISSING}", "", "${MISSING} is not set"},
		{"${A", "", "unterminated"},
		{"${1A}", "", "bad variable reference"},
		{"${}", "", "bad variable reference"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := expandEnv(tt.in, env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("expandEnv(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("expandEnv(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestLoadFromFile(t *testing.T) {
	t.Setenv("APP_DB_PASSWORD", "from-env")
	t.Setenv("REPORT_PW", "")
	cfg, err := Load("testdata/config/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != "testdata/config/good.yaml" || cfg.Users[0].Password != "from-env" {
		t.Fatalf("path %q, password %q", cfg.Path, cfg.Users[0].Password)
	}
	if got := cfg.Users[1].Password; got != "s3cret # not a comment" {
		t.Fatalf("default with a hash: %q", got)
	}
	if _, err := Load("testdata/config/does-not-exist.yaml"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestRedacted(t *testing.T) {
	cfg, err := load("good.yaml", mustRead(t, "testdata/config/good.yaml"), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Locks.Redis.Password = "redis-secret"
	for name, s := range map[string]string{
		"String": cfg.String(),
		"user":   cfg.Users[0].String(),
	} {
		if strings.Contains(s, "pw#1") || strings.Contains(s, "redis-secret") {
			t.Errorf("%s leaks a password: %s", name, s)
		}
	}
	if cfg.Users[0].Password != "pw#1: x" || cfg.Locks.Redis.Password != "redis-secret" {
		t.Error("Redacted modified the original config")
	}
}

func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	yaml := "proxy: {tls: {cert: cert.pem, key: key.pem}}\nusers: [{user: a}]\nbackends: {primary: 127.0.0.1:3306}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "proxy.tls" || ve.Problems[0].Line != 1 {
		t.Fatalf("want one proxy.tls problem on line 1 (files found relative to the config), got %v", err)
	}
}

// TestDemoConfig keeps the repository's demo rules.yaml valid.
func TestDemoConfig(t *testing.T) {
	t.Setenv("LOCKPROXY_DB_PASSWORD", "demo")
	cfg, err := Load("../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) == 0 || cfg.Users[0].Password != "demo" {
		t.Fatalf("rules=%d password=%q", len(cfg.Rules), cfg.Users[0].Password)
	}
}

// TestAliasBomb checks that aliases cannot make the loader expand an
// exponential document: nested merge keys stop with a problem.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n  - &l0 {name: x, table: t, key: [id]}\n")
	prev := "*l0"
	for i := 1; i <= 30; i++ {
		name := fmt.Sprintf("l%d", i)
		b.WriteString("  - &" + name + " {<<: [" + prev + ", " + prev + "]}\n")
		prev = "*" + name
	}
	_, err := load("bomb.yaml", []byte(b.String()), testEnv, "")
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("want a 'too large' problem, got %v", err)
	}
}

func TestMergeKeys(t *testing.T) {
	yaml := "users: [{user: a}]\nbackends: {primary: 127.0.0.1:3306}\nrules:\n" +
		"  - &base {name: a, table: t, key: [id], lock: [write]}\n" +
		"  - &other {name: c, table: v, key: [id], route: primary}\n" +
		"  - {<<: [*other, *base], name: b, table: u}\n"
	cfg, err := load("merge.yaml", []byte(yaml), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[2]
	if r.Name != "b" || r.Table != "u" || r.Route != "primary" || strings.Join(r.Key, ",") != "id" || strings.Join(r.Lock, ",") != "write" {
		t.Fatalf("merged rule: %+v", r)
	}
}

func TestConfigLine(t *testing.T) {
	cfg, err := load("good.yaml", mustRead(t, "testdata/config/good.yaml"), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"rules[1].key": 37, "rules[1]": 35, "rules[0].rewrite.min": 34, "locks.redis.addrs[0]": 19, "nope": 0} {
		if got := cfg.Line(path); got != want {
			t.Errorf("Line(%q) = %d, want %d", path, got, want)
		}
	}
}

// TestStringLoadsBack: the rendering of a configuration (what --check and
// the logs show) is itself a configuration that loads to the same settings,
// users.from_backend included.
func TestStringLoadsBack(t *testing.T) {
	for _, f := range []string{"good.yaml", "good_from_backend.yaml"} {
		cfg, err := load(f, mustRead(t, "testdata/config/"+f), testEnv, "testdata/config")
		if err != nil {
			t.Fatal(err)
		}
		again, err := load("rendered-"+f, []byte(cfg.String()), testEnv, "testdata/config")
		if err != nil {
			t.Fatalf("%s: the rendering does not load: %v\n%s", f, err, cfg)
		}
		if again.UsersFromBackend != cfg.UsersFromBackend || len(again.Users) != len(cfg.Users) {
			t.Errorf("%s: users.from_backend %v with %d users, rendered back as %v with %d",
				f, cfg.UsersFromBackend, len(cfg.Users), again.UsersFromBackend, len(again.Users))
		}
		if again.String() != cfg.String() {
			t.Errorf("%s: rendering twice differs:\n%s\n---\n%s", f, cfg, again)
		}
	}
}

// TestReleaseWindowDefault: locks.redis.release_window is 1ms unless set,
// 0 with mode redlock (whose servers carry no release in another
// request's pipeline), and a window with redlock is refused.
func TestReleaseWindowDefault(t *testing.T) {
	const head = "users: [{user: app}]\nbackends: {primary: 10.0.0.1:3306}\nlocks:\n  backend: redis\n  redis:\n"
	for _, c := range []struct {
		name, redis string
		want        time.Duration
		bad         bool
	}{
		{"unset", "    addrs: [127.0.0.1:6379]\n", DefaultReleaseWindow, false},
		{"off", "    addrs: [127.0.0.1:6379]\n    release_window: 0s\n", 0, false},
		{"set", "    addrs: [127.0.0.1:6379]\n    release_window: 3ms\n", 3 * time.Millisecond, false},
		{"redlock unset", "    addrs: [127.0.0.1:6379, 127.0.0.1:6380, 127.0.0.1:6381]\n    mode: redlock\n", 0, false},
		{"redlock set", "    addrs: [127.0.0.1:6379, 127.0.0.1:6380, 127.0.0.1:6381]\n    mode: redlock\n    release_window: 1ms\n", 0, true},
		{"over the bound", "    addrs: [127.0.0.1:6379]\n    release_window: 11ms\n", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load("w.yaml", []byte(head+c.redis), testEnv, "")
			if c.bad {
				if err == nil || !strings.Contains(err.Error(), "locks.redis.release_window") {
					t.Fatalf("load: %v; want an error naming locks.redis.release_window", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Locks.Redis.Window(); got != c.want {
				t.Errorf("Window() = %s, want %s", got, c.want)
			}
		})
	}
}
