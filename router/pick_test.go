package router

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// unstarted returns a router over replicas that no check will touch, and
// a function that sets a replica's state as a check would have.
func unstarted(t *testing.T, replicas ...string) (*Router, *prometheus.Registry, func(addr string, res checkResult)) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r := New(Config{Primary: "primary:1", Replicas: replicas, MaxLag: 2 * time.Second}, nil, reg)
	set := func(addr string, res checkResult) {
		t.Helper()
		b := r.find(addr)
		if b == nil {
			t.Fatalf("no backend %s", addr)
		}
		b.apply(res, time.Now(), time.Now(), r.metrics)
	}
	return r, reg, set
}

var (
	inSync  = checkResult{up: true, lagKnown: true, gtid: "0-1-10"}
	lagging = checkResult{up: true, lag: 5 * time.Second, lagKnown: true, err: ErrLagging}
	stopped = checkResult{up: true, err: ErrReplicationStopped}
	failed  = checkResult{err: ErrCheckFailed}
)

func TestPickChoosesOnlyHealthy(t *testing.T) {
	tests := []struct {
		name   string
		states map[string]checkResult
		want   []string // acceptable picks; none means ok=false
	}{
		{"unchecked replicas are out", nil, nil},
		{"one healthy", map[string]checkResult{"a": inSync, "b": stopped, "c": failed}, []string{"a"}},
		{"lagging is out", map[string]checkResult{"a": lagging, "b": inSync, "c": stopped}, []string{"b"}},
		{"all out", map[string]checkResult{"a": lagging, "b": stopped, "c": failed}, nil},
		{"healthy at the limit", map[string]checkResult{"c": {up: true, lag: 2 * time.Second, lagKnown: true}}, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, set := unstarted(t, "a", "b", "c")
			for addr, res := range tt.states {
				set(addr, res)
			}
			for range 6 {
				addr, ok := r.Pick()
				if len(tt.want) == 0 {
					if ok {
						t.Fatalf("Pick() = %q, want none", addr)
					}
					continue
				}
				if !ok || !contains(tt.want, addr) {
					t.Fatalf("Pick() = %q, %v; want one of %v", addr, ok, tt.want)
				}
			}
		})
	}
}

func TestPickNoReplicas(t *testing.T) {
	r, _, _ := unstarted(t)
	if addr, ok := r.Pick(); ok {
		t.Fatalf("Pick() = %q with no replicas configured", addr)
	}
	if _, release, ok := r.PickAndTrack(); ok {
		t.Fatal("PickAndTrack() ok with no replicas configured")
	} else {
		release() // must be callable
	}
}

func TestPickBalancesOnOutstanding(t *testing.T) {
	r, _, set := unstarted(t, "a", "b", "c")
	for _, a := range []string{"a", "b", "c"} {
		set(a, inSync)
	}
	// Ties are broken round-robin: three picks without load hit all three.
	seen := map[string]int{}
	for range 3 {
		addr, _ := r.Pick()
		seen[addr]++
	}
	if len(seen) != 3 {
		t.Fatalf("round-robin over idle replicas picked %v, want each once", seen)
	}
	// Tracked picks spread load: six concurrent reads are two per replica.
	var releases []func()
	for range 6 {
		_, rel, ok := r.PickAndTrack()
		if !ok {
			t.Fatal("PickAndTrack() found no replica")
		}
		releases = append(releases, rel)
	}
	for _, s := range r.Status()[1:] {
		if s.Outstanding != 2 {
			t.Errorf("%s outstanding = %d, want 2 (status %+v)", s.Addr, s.Outstanding, r.Status())
		}
	}
	// The least loaded wins outright.
	done := r.Acquire("a")
	done2 := r.Acquire("b")
	for range 4 {
		if addr, _ := r.Pick(); addr != "c" {
			t.Fatalf("Pick() = %q, want c, the least loaded", addr)
		}
	}
	done()
	done() // idempotent
	done2()
	for _, rel := range releases {
		rel()
		rel()
	}
	for _, s := range r.Status() {
		if s.Outstanding != 0 {
			t.Errorf("%s outstanding = %d after every release, want 0", s.Addr, s.Outstanding)
		}
	}
	r.Acquire("unknown:1")() // no-op, no panic
}

func TestPickForGTID(t *testing.T) {
	r, _, set := unstarted(t, "a", "b")
	set("a", checkResult{up: true, lagKnown: true, gtid: "0-1-10"})
	set("b", checkResult{up: true, lagKnown: true, gtid: "0-1-20"})
	tests := []struct {
		want string
		ok   bool
		addr string
	}{
		{"0-1-15", true, "b"},
		{"0-1-20", true, "b"},
		{"0-1-21", false, ""},
		{"1-1-1", false, ""},
		{"bad'gtid", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			addr, release, ok := r.PickFor(tt.want)
			defer release()
			if ok != tt.ok || addr != tt.addr {
				t.Errorf("PickFor(%q) = %q, %v; want %q, %v", tt.want, addr, ok, tt.addr, tt.ok)
			}
		})
	}
}

func TestMarkDownHoldsUntilLaterCheck(t *testing.T) {
	r, _, set := unstarted(t, "a")
	set("a", inSync)
	started := time.Now()
	r.MarkDown("a", errors.New("connection reset"))
	if _, ok := r.Pick(); ok {
		t.Fatal("Pick() found the replica just marked down")
	}
	st := r.Status()[1]
	if st.Healthy || st.LastError == "" {
		t.Fatalf("status after MarkDown = %+v", st)
	}
	if v := testutil.ToFloat64(r.metrics.healthy.WithLabelValues("a")); v != 0 {
		t.Errorf("lockproxy_replica_healthy = %v after MarkDown, want 0", v)
	}
	// A check that began before MarkDown does not bring it back...
	b := r.find("a")
	b.apply(inSync, started, time.Now(), r.metrics)
	if _, ok := r.Pick(); ok {
		t.Fatal("a check started before MarkDown put the replica back")
	}
	// ...one that began after does.
	b.apply(inSync, time.Now(), time.Now(), r.metrics)
	if addr, ok := r.Pick(); !ok || addr != "a" {
		t.Fatalf("Pick() = %q, %v after a later successful check", addr, ok)
	}
	r.MarkDown("nobody:1", nil) // ignored
}

func TestPrimaryHealthyStates(t *testing.T) {
	r, _, _ := unstarted(t)
	if !r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() false before any check; want optimistic true")
	}
	p := r.find("primary:1")
	p.apply(failed, time.Now(), time.Now(), r.metrics)
	if r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() true after a failed check")
	}
	p.apply(checkResult{up: true}, time.Now(), time.Now(), r.metrics)
	if !r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() false after a good check")
	}
	r.MarkDown("primary:1", errors.New("broken pipe"))
	if r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() true after MarkDown")
	}
	none := New(Config{}, nil, nil)
	if none.PrimaryHealthy() {
		t.Error("PrimaryHealthy() true with no primary configured")
	}
}

func TestUpdateKeepsState(t *testing.T) {
	r, reg, set := unstarted(t, "a", "b")
	set("a", inSync)
	set("b", stopped)
	hold := r.Acquire("a")
	defer hold()
	r.Update(Config{Primary: "primary:1", Replicas: []string{"c", "a", "a", ""}, MaxLag: 2 * time.Second})
	st := r.Status()
	if len(st) != 3 || st[1].Addr != "c" || st[2].Addr != "a" {
		t.Fatalf("Status() after Update = %+v, want primary, c, a", st)
	}
	if !st[2].Healthy || st[2].Outstanding != 1 {
		t.Errorf("kept replica a lost its state: %+v", st[2])
	}
	if st[1].Healthy || st[1].Checked {
		t.Errorf("new replica c is in service before any check: %+v", st[1])
	}
	if addr, ok := r.Pick(); !ok || addr != "a" {
		t.Errorf("Pick() = %q, %v after Update, want a", addr, ok)
	}
	if n := testutil.CollectAndCount(reg, "lockproxy_replica_healthy"); n != 1 {
		t.Errorf("lockproxy_replica_healthy has %d series after b was removed, want 1 (a)", n)
	}
	// A tighter MaxLag takes a lagging-by-1s replica out at once.
	set("a", checkResult{up: true, lag: time.Second, lagKnown: true})
	r.Update(Config{Primary: "primary:1", Replicas: []string{"a"}, MaxLag: 500 * time.Millisecond})
	if addr, ok := r.Pick(); ok {
		t.Errorf("Pick() = %q after MaxLag fell below its lag", addr)
	}
}

func TestLagMetricUnknownIsNaN(t *testing.T) {
	r, _, set := unstarted(t, "a")
	set("a", checkResult{up: true, lag: 3 * time.Second, lagKnown: true, err: ErrLagging})
	if v := testutil.ToFloat64(r.metrics.lag.WithLabelValues("a")); v != 3 {
		t.Errorf("lag = %v, want 3", v)
	}
	set("a", stopped)
	if v := testutil.ToFloat64(r.metrics.lag.WithLabelValues("a")); !math.IsNaN(v) {
		t.Errorf("lag = %v while unknown, want NaN", v)
	}
}

func TestConfigStringHidesPassword(t *testing.T) {
	s := Config{Primary: "p:1", User: "app", Password: "s3cret"}.String()
	if strings.Contains(s, "s3cret") || !strings.Contains(s, "p:1") {
		t.Fatalf("Config.String() = %q: want the primary, never the password", s)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestUpdateReplacesPrimary(t *testing.T) {
	r, reg, _ := unstarted(t)
	r.find("primary:1").apply(failed, time.Now(), time.Now(), r.metrics)
	if r.PrimaryHealthy() {
		t.Fatal("PrimaryHealthy() after a failed check")
	}
	r.Update(Config{Primary: "primary:2"})
	st := r.Status()
	if len(st) != 1 || st[0].Addr != "primary:2" || st[0].Role != RolePrimary || st[0].Checked {
		t.Fatalf("Status() after a new primary = %+v", st)
	}
	if !r.PrimaryHealthy() {
		t.Error("new primary is failed before its first check")
	}
	if n := testutil.CollectAndCount(reg, "lockproxy_backend_up"); n != 0 {
		t.Errorf("old primary's lockproxy_backend_up series kept: %d", n)
	}
	r.Update(Config{})
	if r.PrimaryHealthy() {
		t.Error("PrimaryHealthy() with no primary configured")
	}
}
