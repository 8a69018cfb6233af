package testbed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr bool
	}{
		{
			name: "script output",
			in:   "# Written by scripts/testbed.sh up\nLOCKPROXY_PRIMARY=127.0.0.1:20001\n\nLOCKPROXY_DB_PASSWORD=a=b\n",
			want: map[string]string{"LOCKPROXY_PRIMARY": "127.0.0.1:20001", "LOCKPROXY_DB_PASSWORD": "a=b"},
		},
		{name: "empty value", in: "K=\n", want: map[string]string{"K": ""}},
		{name: "no equals", in: "JUNK\n", wantErr: true},
		{name: "empty key", in: "=v\n", wantErr: true},
		{name: "space in key", in: "A B=v\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseEnv(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, errEnv) {
					t.Fatalf("err = %v, want errEnv", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	full := "LOCKPROXY_PRIMARY=127.0.0.1:1\nLOCKPROXY_REPLICA=127.0.0.1:2\nLOCKPROXY_REDIS=127.0.0.1:3\n" +
		"LOCKPROXY_DB_USER=u\nLOCKPROXY_DB_PASSWORD=p\n"
	tests := []struct {
		name    string
		env     string // "" means no env file at all
		wantErr bool
	}{
		{name: "complete", env: full},
		{name: "missing file", wantErr: true},
		{name: "missing redis", env: strings.Replace(full, "LOCKPROXY_REDIS=127.0.0.1:3\n", "", 1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.env != "" {
				if err := os.WriteFile(filepath.Join(dir, "env"), []byte(tt.env), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := load(dir)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("load succeeded: %+v", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.PrimaryAddr != "127.0.0.1:1" || b.ReplicaAddr != "127.0.0.1:2" || b.RedisAddr != "127.0.0.1:3" ||
				b.User != "u" || b.Password != "p" || b.Dir != dir {
				t.Errorf("bed = %+v", b)
			}
			if got := b.Getenv("LOCKPROXY_DB_USER"); got != "u" {
				t.Errorf("Getenv = %q", got)
			}
			if env := b.Environ(); len(env) != 5 || env[0] != "LOCKPROXY_DB_PASSWORD=p" {
				t.Errorf("Environ = %v", env)
			}
		})
	}
}

func TestOpenSharedUnreachable(t *testing.T) {
	dir := t.TempDir()
	// Port 1 on loopback: nothing listens there.
	env := "LOCKPROXY_PRIMARY=127.0.0.1:1\nLOCKPROXY_REPLICA=127.0.0.1:1\nLOCKPROXY_REDIS=127.0.0.1:1\nLOCKPROXY_DB_USER=u\n"
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := openShared(t.Context(), dir)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestRepoRootHoldsScript(t *testing.T) {
	if _, err := os.Stat(Script()); err != nil {
		t.Fatalf("script not found from RepoRoot %s: %v", RepoRoot(), err)
	}
	if _, err := os.Stat(filepath.Join(RepoRoot(), "go.mod")); err != nil {
		t.Fatalf("RepoRoot %s has no go.mod: %v", RepoRoot(), err)
	}
}
