package lockmgr_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockproxy/lockproxy/lockmgr"
)

func TestNormalizeKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []lockmgr.Key
		want string
		err  error
	}{
		{"sorted and deduplicated", []lockmgr.Key{{Name: "b"}, {Name: "a"}, {Name: "b"}}, "a,b", nil},
		{"empty list", nil, "", lockmgr.ErrInvalidKey},
		{"empty name", []lockmgr.Key{{Name: "a"}, {Name: ""}}, "", lockmgr.ErrInvalidKey},
		{"binary names", []lockmgr.Key{{Name: "\x00z"}, {Name: "\xff"}}, "\x00z,\xff", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lockmgr.NormalizeKeys(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v; want %v", err, tc.err)
			}
			var names []string
			for _, k := range got {
				names = append(names, k.Name)
			}
			if s := strings.Join(names, ","); s != tc.want {
				t.Errorf("got %q; want %q", s, tc.want)
			}
		})
	}
}

// TestNormalizeKeysMergesBounds: one key named twice keeps the strictest
// of what its rules ask: no hand-off when one fences, else the tighter
// hand-off window.
func TestNormalizeKeysMergesBounds(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		in        []lockmgr.Key
		noHandoff bool
		window    time.Duration
	}{
		{"one fences", []lockmgr.Key{{Name: "a"}, {Name: "a", NoHandoff: true}}, true, 0},
		{"tighter window", []lockmgr.Key{{Name: "a", HandoffWindow: 30 * ms}, {Name: "a", HandoffWindow: 10 * ms}}, false, 10 * ms},
		{"window and none", []lockmgr.Key{{Name: "a"}, {Name: "a", HandoffWindow: 10 * ms}}, false, 10 * ms},
		{"none and window", []lockmgr.Key{{Name: "a", HandoffWindow: 10 * ms}, {Name: "a"}}, false, 10 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lockmgr.NormalizeKeys(tc.in)
			if err != nil || len(got) != 1 {
				t.Fatalf("got %v, %v; want one key", got, err)
			}
			if got[0].NoHandoff != tc.noHandoff || got[0].HandoffWindow != tc.window {
				t.Fatalf("got %+v; want NoHandoff %v, HandoffWindow %v", got[0], tc.noHandoff, tc.window)
			}
		})
	}
}

func TestOwnerOlder(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	a := lockmgr.Owner{Instance: "i", Session: 2, Start: t0}
	b := lockmgr.Owner{Instance: "i", Session: 1, Start: t0.Add(time.Microsecond)}
	c := lockmgr.Owner{Instance: "i", Session: 23, Start: t0}
	for _, tc := range []struct {
		name string
		x, y lockmgr.Owner
		want bool
	}{
		{"earlier start wins", a, b, true},
		{"later start loses", b, a, false},
		{"tie broken by id", a, c, a.ID() < c.ID()},
		{"tie other way", c, a, c.ID() < a.ID()},
		{"not older than itself", a, a, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.x.Older(tc.y); got != tc.want {
				t.Errorf("%s.Older(%s) = %v", tc.x, tc.y, got)
			}
		})
	}
}

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "acquired"},
		{fmt.Errorf("x: %w", lockmgr.ErrWaitTimeout), "timeout"},
		{fmt.Errorf("x: %w", lockmgr.ErrDeadlock), "deadlock"},
		{fmt.Errorf("x: %w", lockmgr.ErrUnavailable), "unavailable"},
		{context.Canceled, "error"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := lockmgr.Result(tc.err); got != tc.want {
				t.Errorf("Result(%v) = %q", tc.err, got)
			}
		})
	}
}

func TestWaitError(t *testing.T) {
	k := lockmgr.Key{Name: "k", Rule: "r"}
	dl, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if err := lockmgr.WaitError(dl, k); !errors.Is(err, lockmgr.ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	cc, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := lockmgr.WaitError(cc, k); errors.Is(err, lockmgr.ErrWaitTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

func newLease(t *testing.T, ledger *lockmgr.Ledger, releases *int, relErr *error) (*lockmgr.Lease, *lockmgr.Keeper) {
	t.Helper()
	return lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner:      lockmgr.Owner{Instance: "i", Session: 7, Start: time.Now()},
		Keys:       []lockmgr.Key{{Name: "a", Rule: "r1"}, {Name: "b", Rule: "r2"}},
		Fences:     []uint64{10, 20},
		ValidUntil: time.Now().Add(time.Hour),
		Release: func(context.Context) error {
			*releases++
			return *relErr
		},
		Ledger: ledger,
	})
}

func TestLeaseRelease(t *testing.T) {
	var n int
	var relErr error = lockmgr.ErrUnavailable
	l, _ := newLease(t, nil, &n, &relErr)
	if !l.Valid() || l.Fence("a") != 10 || l.Fence("b") != 20 || l.Fence("c") != 0 {
		t.Fatalf("fresh lease: valid %v fences %d %d %d", l.Valid(), l.Fence("a"), l.Fence("b"), l.Fence("c"))
	}
	if err := l.Release(context.Background()); !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Fatalf("Release = %v; want the backend's error", err)
	}
	<-l.Done()
	if !errors.Is(l.Err(), lockmgr.ErrReleased) || l.Valid() || !l.ValidUntil().IsZero() {
		t.Errorf("after release: Err %v Valid %v", l.Err(), l.Valid())
	}
	relErr = nil
	for range 3 {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n != 2 {
		t.Errorf("backend release called %d times; want 2 (one failure, one success, then nothing)", n)
	}
}

func TestKeeper(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ledger := lockmgr.NewLedger(m)
	var n int
	var relErr error
	l, k := newLease(t, ledger, &n, &relErr)
	before := l.ValidUntil()
	k.Extend(before.Add(-time.Minute))
	if !l.ValidUntil().Equal(before) {
		t.Errorf("Extend moved validity backwards")
	}
	k.Extend(before.Add(time.Minute))
	if !l.ValidUntil().After(before) {
		t.Errorf("Extend did not move validity forward")
	}
	if len(ledger.Snapshot()) != 2 || testutil.ToFloat64(gauge(t, reg, "lockproxy_locks_held")) != 2 {
		t.Errorf("ledger does not show the two held keys")
	}
	if !k.Lose(errors.New("gone")) || k.Lose(errors.New("again")) {
		t.Errorf("Lose must end the lease exactly once")
	}
	if !errors.Is(l.Err(), lockmgr.ErrLeaseLost) || l.Valid() {
		t.Errorf("lost lease: Err %v Valid %v", l.Err(), l.Valid())
	}
	if len(ledger.Snapshot()) != 0 || testutil.ToFloat64(gauge(t, reg, "lockproxy_locks_held")) != 0 {
		t.Errorf("lost lease still in the ledger")
	}
	if got := testutil.ToFloat64(gauge(t, reg, "lockproxy_lock_lease_lost_total")); got != 2 {
		t.Errorf("lease_lost_total summed over rules = %v; want 2 (one per rule)", got)
	}
	if _, err := lockmgr.NewMetrics(reg); err == nil {
		t.Errorf("registering the metrics twice on one registry succeeded")
	}
}

// gauge sums a metric family's counter and gauge values.
func gauge(t *testing.T, g prometheus.Gatherer, name string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	c := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sum"})
	c.Set(sum)
	return c
}

// TestInitRules: every per-rule series and every renewal result exists at
// 0 before anything happened, so an alert on them sees 0, not nothing.
func TestInitRules(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRules([]string{"a", "b"})
	for name, want := range map[string]int{
		"lockproxy_lock_lease_lost_total":     2,
		"lockproxy_lock_acquire_total":        2 * len(lockmgr.AcquireResults),
		"lockproxy_lock_renewals_total":       3,
		"lockproxy_lock_wait_seconds":         2,
		"lockproxy_lock_hold_seconds":         2,
		"lockproxy_lock_handoff_seconds":      2,
		"lockproxy_lock_local_handoffs_total": 2,
		"lockproxy_lock_release_grants_total": 2,
		"lockproxy_lock_waiters_per_key":      2,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series, %v; want %d", name, n, err, want)
		}
	}
}
