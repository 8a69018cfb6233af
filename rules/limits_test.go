package rules

import (
	"strings"
	"testing"
)

// TestProxyLimits: the connection and memory limits default sensibly,
// follow max_allowed_packet, and are checked against each other.
func TestProxyLimits(t *testing.T) {
	const base = "users: [{user: app, password: x}]\nbackends: {primary: 127.0.0.1:3306}\n"
	t.Run("defaults", func(t *testing.T) {
		for _, tc := range []struct {
			proxy           string
			session, budget Size
			mhs             int
		}{
			// max_statement_size follows max_allowed_packet.
			{"", 128 << 20, 1 << 30, 256},
			{"proxy: {max_allowed_packet: 268435456}\n", 512 << 20, 1 << 30, 256},
			{"proxy: {max_allowed_packet: 1073741824, max_handshakes: 10}\n", 2 << 30, 2 << 30, 10},
		} {
			cfg, err := LoadBytes("t.yaml", []byte(tc.proxy+base))
			if err != nil {
				t.Fatalf("%q: %v", tc.proxy, err)
			}
			p := cfg.Proxy
			if p.SessionMemory != tc.session || p.MemoryBudget != tc.budget || p.MaxHandshakes != tc.mhs ||
				p.MaxStatementSize != p.MaxAllowedPacket || p.MaxNesting != DefaultMaxNesting {
				t.Errorf("%q: got %+v", tc.proxy, p)
			}
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, tc := range []struct{ proxy, want string }{
			{"proxy: {max_handshakes: 0}\n", "proxy.max_handshakes"},
			{"proxy: {session_memory: 1024}\n", "proxy.session_memory: must be at least proxy.max_allowed_packet"},
			{"proxy: {memory_budget: 1048576}\n", "proxy.memory_budget: must be at least proxy.session_memory"},
			{"proxy: {max_statement_size: 10}\n", "proxy.max_statement_size"},
			{"proxy: {max_nesting: 2}\n", "proxy.max_nesting"},
		} {
			_, err := LoadBytes("t.yaml", []byte(tc.proxy+base))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: want %q, got %v", tc.proxy, tc.want, err)
			}
		}
	})
}
