package rules

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{
		"0": 0, "1024": 1024, " 67108864 ": 64 << 20, "512KiB": 512 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30,
		"2TiB": 2 << 40, "64M": 64 << 20, "1G": 1 << 30, "512K": 512 << 10, "4096B": 4096, "1 GiB": 1 << 30,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"64MB": "binary units", "1GB": "binary units", "1.5GiB": "size in bytes", "-1": "negative",
		"+5": "size in bytes", "GiB": "size in bytes", "": "size in bytes", "1 gib": "size in bytes",
		"9999999999TiB": "too large", "1e9": "size in bytes",
	} {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseSize(%q): %v, want an error saying %q", in, err, msg)
		}
	}
}

// TestSizeInConfig: the memory bounds take units in rules.yaml, and a bad
// one is reported at its key.
func TestSizeInConfig(t *testing.T) {
	const base = "users: [{user: app, password: x}]\nbackends: {primary: 127.0.0.1:3306}\n"
	cfg, err := LoadBytes("t.yaml", []byte("proxy: {memory_budget: 2GiB, session_memory: 512MiB, max_statement_size: 4M, max_allowed_packet: 16MiB}\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Proxy; p.MemoryBudget != 2<<30 || p.SessionMemory != 512<<20 || p.MaxStatementSize != 4<<20 || p.MaxAllowedPacket != 16<<20 {
		t.Errorf("got %+v", p)
	}
	_, err = LoadBytes("t.yaml", []byte("proxy: {memory_budget: 1GB}\n"+base))
	if err == nil || !strings.Contains(err.Error(), "proxy.memory_budget") || !strings.Contains(err.Error(), "binary units") {
		t.Errorf("memory_budget: 1GB: %v", err)
	}
}
