package main

import (
	"syscall"
	"testing"

	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRaiseFDLimit: a soft limit below what max_connections needs is
// raised (up to the hard limit), and a hard limit below it is warned of.
func TestRaiseFDLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	p := rules.ProxyConfig{MaxConnections: 100, MaxHandshakes: 10}
	need := fdsNeeded(p)
	if orig.Max < need {
		t.Fatalf("hard limit %d is below %d: the test cannot raise the soft one", orig.Max, need)
	}
	low := syscall.Rlimit{Cur: 64, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	raiseFDLimit(p, zap.New(core))
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != need {
		t.Errorf("soft limit %d after raising, want %d", now.Cur, need)
	}
	if logs.Len() != 0 {
		t.Errorf("warned although the limit could be raised: %v", logs.All()[0].Message)
	}

	huge := rules.ProxyConfig{MaxConnections: int(orig.Max), MaxHandshakes: 10}
	raiseFDLimit(huge, zap.New(core))
	if logs.FilterMessageSnippet("file descriptor limit is below").Len() != 1 {
		t.Error("no warning when even the hard limit is too low")
	}
}
