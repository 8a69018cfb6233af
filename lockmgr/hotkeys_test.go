package lockmgr

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHotKeysTopAndWindows(t *testing.T) {
	h := newHotKeys()
	// 30 keys; key i waited i times 10ms. Only the 10 longest are exported.
	for i := 1; i <= 30; i++ {
		for range i {
			h.add(Key{Name: fmt.Sprintf("db.t/%d", i), Rule: "r"}, 10*time.Millisecond)
		}
	}
	top := h.top(hotKeyTop)
	if len(top) != 10 || top[0].key != "db.t/30" || top[9].key != "db.t/21" {
		t.Fatalf("top = %v", top)
	}
	if d := top[0].secs - 0.3; d > 1e-9 || d < -1e-9 {
		t.Errorf("db.t/30 waited %v s, want 0.3", top[0].secs)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	if n := testutil.CollectAndCount(h, "lockproxy_lock_hot_key_wait_seconds"); n != 10 {
		t.Errorf("%d series exported, want 10", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	// One window later the old waits still count (previous window); a
	// new wait adds to them. Two windows later they are gone.
	h.mu.Lock()
	h.start = h.start.Add(-hotKeyWindow)
	h.mu.Unlock()
	h.add(Key{Name: "db.t/1", Rule: "r"}, time.Second)
	if top := h.top(1); top[0].key != "db.t/1" || top[0].secs < 1 {
		t.Fatalf("after a rotation: %v", top)
	}
	h.mu.Lock()
	h.start = h.start.Add(-2 * hotKeyWindow)
	h.mu.Unlock()
	if top := h.top(hotKeyTop); len(top) != 0 {
		t.Fatalf("two windows later: %v", top)
	}
}

func TestHotKeysCap(t *testing.T) {
	h := newHotKeys()
	for i := range hotKeyCap + 5 {
		h.add(Key{Name: fmt.Sprint(i), Rule: "r"}, time.Millisecond)
	}
	h.mu.Lock()
	n := len(h.cur)
	h.mu.Unlock()
	if n != hotKeyCap {
		t.Fatalf("%d keys tracked, want the cap %d", n, hotKeyCap)
	}
}
