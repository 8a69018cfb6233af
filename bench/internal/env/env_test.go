package env

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadBed(t *testing.T) {
	dir := t.TempDir()
	content := "# comment\nLOCKPROXY_PRIMARY=127.0.0.1:1111\nLOCKPROXY_REPLICA=127.0.0.1:2222\n" +
		"LOCKPROXY_REDIS=127.0.0.1:3333\nLOCKPROXY_DB_USER=u\nLOCKPROXY_DB_PASSWORD=p w\n"
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := ReadBed(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Primary != "127.0.0.1:1111" || b.Replica != "127.0.0.1:2222" || b.Redis != "127.0.0.1:3333" ||
		b.User != "u" || b.Password != "p w" {
		t.Fatalf("ReadBed = %+v", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte("X=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBed(dir); err == nil {
		t.Fatal("want an error for an env without a primary")
	}
}

func TestRenderConfig(t *testing.T) {
	bed := &Bed{Primary: "127.0.0.1:1", Replica: "127.0.0.1:2", User: "app", Password: "s3cret"}
	p := &Proxy{Addr: "127.0.0.1:10", AdminAddr: "127.0.0.1:11"}
	tests := []struct {
		name string
		cfg  ProxyConfig
		want []string
		not  []string
	}{
		{"zero", ProxyConfig{}, []string{"listen: 127.0.0.1:10", "listen: 127.0.0.1:11", "backend: memory", "rules: []", `password: "s3cret"`}, []string{"replicas"}},
		{"replica and rules", ProxyConfig{WithReplica: true, Locks: "  backend: redis\n  redis:\n    addrs: [x]", Rules: "  - name: r\n    table: t\n    key: [id]"},
			[]string{"replicas: [127.0.0.1:2]", "backend: redis", "rules:\n  - name: r"}, []string{"memory", "rules: []"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderConfig(p, bed, tt.cfg)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("config has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestFreePorts(t *testing.T) {
	ps, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: not distinct and positive", ps)
		}
		seen[p] = true
	}
}

func TestHostPort(t *testing.T) {
	h, p, err := HostPort("127.0.0.1:3307")
	if err != nil || h != "127.0.0.1" || p != 3307 {
		t.Fatalf("HostPort = %q %d %v", h, p, err)
	}
	if _, _, err := HostPort("nohost"); err == nil {
		t.Fatal("want error")
	}
}
