package contend

import (
	"math"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		in   []time.Duration
		want Latency
	}{
		{"none", nil, Latency{}},
		{"one", []time.Duration{3 * ms}, Latency{N: 1, P50Ms: 3, P99Ms: 3, MaxMs: 3, AvgMs: 3}},
		{"unsorted", []time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms}, Latency{N: 4, P50Ms: 2, P99Ms: 4, MaxMs: 4, AvgMs: 2.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("input untouched", func(t *testing.T) {
		in := []time.Duration{3, 1, 2}
		Summarize(in)
		if in[0] != 3 || in[1] != 1 {
			t.Errorf("input reordered: %v", in)
		}
	})
}

func TestPercentile(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i + 1)
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {0, 1}, {1, 1}, {99.5, 100}} {
		t.Run("", func(t *testing.T) {
			if got := Percentile(s, tt.p); got != tt.want {
				t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestFairnessOf(t *testing.T) {
	tests := []struct {
		name   string
		counts []int
		jain   float64
		mom    float64
		starve int
	}{
		{"equal", []int{5, 5, 5, 5}, 1, 1, 0},
		{"one did all", []int{8, 0, 0, 0}, 0.25, 0, 3},
		{"two to one", []int{2, 1}, 9.0 / 10.0, 2, 0},
		{"empty", nil, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := FairnessOf(tt.counts)
			if math.Abs(f.Jain-tt.jain) > 1e-9 || f.MaxOverMin != tt.mom || f.Starved != tt.starve {
				t.Errorf("FairnessOf(%v) = %+v, want jain %v max/min %v starved %d", tt.counts, f, tt.jain, tt.mom, tt.starve)
			}
		})
	}
}

func TestOversoldLost(t *testing.T) {
	tests := []struct {
		name                   string
		initial, final, orders int64
		wantOversold, wantLost int64
	}{
		{"correct sale", 100, 0, 100, 0, 0},
		{"unsafe: everyone bought, stock barely moved", 100, 98, 100, 0, 98},
		{"oversold", 100, 0, 130, 30, 30},
		{"partial, correct", 100, 40, 60, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Oversold(tt.initial, tt.orders); got != tt.wantOversold {
				t.Errorf("Oversold = %d, want %d", got, tt.wantOversold)
			}
			if got := Lost(tt.initial, tt.final, tt.orders); got != tt.wantLost {
				t.Errorf("Lost = %d, want %d", got, tt.wantLost)
			}
		})
	}
}

func TestMedianRatio(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median odd = %v", got)
	}
	if got := Median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("Median even = %v", got)
	}
	if Median(nil) != 0 || Ratio(1, 0) != 0 || Ratio(3, 2) != 1.5 {
		t.Error("Median(nil), Ratio(1,0) or Ratio(3,2) wrong")
	}
	if X(0) != "–" || X(1.234) != "1.23×" {
		t.Errorf("X: %q %q", X(0), X(1.234))
	}
}

func TestParseLockMetrics(t *testing.T) {
	text := `# HELP lockproxy_lock_hold_seconds x
# TYPE lockproxy_lock_hold_seconds histogram
lockproxy_lock_hold_seconds_bucket{rule="a",le="0.001"} 3
lockproxy_lock_hold_seconds_sum{rule="a"} 1.5
lockproxy_lock_hold_seconds_count{rule="a"} 10
lockproxy_lock_hold_seconds_sum{rule="b"} 0.5
lockproxy_lock_hold_seconds_count{rule="b"} 10
lockproxy_lock_wait_seconds_sum{rule="a"} 2
lockproxy_lock_wait_seconds_count{rule="a"} 4
lockproxy_lock_waiters 3
`
	m, err := ParseLockMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	want := LockMetrics{WaitSum: 2, WaitCount: 4, HoldSum: 2, HoldCount: 20}
	if m != want {
		t.Fatalf("ParseLockMetrics = %+v, want %+v", m, want)
	}
	d := m.Sub(LockMetrics{HoldSum: 1, HoldCount: 10})
	wait, hold, busy := LockFigures(d, 4)
	if wait != 500 || hold != 100 || busy != 0.25 {
		t.Errorf("LockFigures = %v ms wait, %v ms hold, %v busy; want 500, 100, 0.25", wait, hold, busy)
	}
	if _, err := ParseLockMetrics("lockproxy_lock_hold_seconds_sum{rule=\"a\"} x\n"); err == nil {
		t.Error("a bad value parsed")
	}
}
