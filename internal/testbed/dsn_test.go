package testbed

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestDSN(t *testing.T) {
	b := &Bed{User: "lockproxy_test", Password: "p@ss:w/rd"}
	tests := []struct {
		name, addr, db, params string
		wantParams             map[string]string
	}{
		{name: "bare", addr: "127.0.0.1:20001"},
		{name: "db", addr: "127.0.0.1:20001", db: "shop"},
		{name: "params", addr: "127.0.0.1:3307", db: "shop", params: "parseTime=true&multiStatements=true"},
		{name: "leading question mark", addr: "127.0.0.1:3307", params: "?interpolateParams=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := b.DSN(tt.addr, tt.db, tt.params)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatalf("ParseDSN(%q): %v", dsn, err)
			}
			if cfg.User != b.User || cfg.Passwd != b.Password || cfg.Addr != tt.addr || cfg.DBName != tt.db || cfg.Net != "tcp" {
				t.Errorf("DSN %q parses to %+v", dsn, cfg)
			}
			switch tt.params {
			case "parseTime=true&multiStatements=true":
				if !cfg.ParseTime || !cfg.MultiStatements {
					t.Errorf("DSN %q lost params", dsn)
				}
			case "?interpolateParams=true":
				if !cfg.InterpolateParams {
					t.Errorf("DSN %q lost params", dsn)
				}
			}
		})
	}
}

func TestSharedBedRefusesToBreakServers(t *testing.T) {
	b := &Bed{Shared: true, Dir: t.TempDir()}
	ops := map[string]func() error{
		"KillReplica":    func() error { return b.KillReplica(t.Context()) },
		"RestartReplica": func() error { return b.RestartReplica(t.Context()) },
		"RestartRedis":   func() error { return b.RestartRedis(t.Context()) },
		"Stop":           func() error { return b.Stop(t.Context(), Primary) },
		"Start":          func() error { return b.Start(t.Context(), Redis) },
		"StopReplica":    func() error { return b.StopReplica(t.Context()) },
		"StartReplica":   func() error { return b.StartReplica(t.Context()) },
		"destroy":        func() error { return b.destroy(t.Context()) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			if err := op(); !errors.Is(err, ErrShared) {
				t.Fatalf("err = %v, want ErrShared", err)
			}
		})
	}
}
