package growth

import (
	"fmt"
	"testing"
)

func TestBounds(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		b          Bound
		start, end float64
		ok         bool
	}{
		{Bounds[0], 21, 31, true}, // goroutines: +10 allowed
		{Bounds[0], 21, 32, false},
		{Bounds[1], 32, 37, true}, // fds: +5
		{Bounds[1], 32, 38, false},
		{Bounds[2], 40 * mib, 56 * mib, true}, // small start: +16 MiB wins over 25%
		{Bounds[2], 40 * mib, 56*mib + 1, false},
		{Bounds[2], 100 * mib, 125 * mib, true}, // large start: 25% wins
		{Bounds[2], 100 * mib, 126 * mib, false},
		{Bounds[3], 30 * mib, 20 * mib, true}, // shrinking is fine
	}
	for _, tt := range tests {
		if got := tt.end <= tt.b.Limit(tt.start); got != tt.ok {
			t.Errorf("%s %s: start %v end %v: ok = %v, want %v", tt.b.Metric, tt.b.State, tt.start, tt.end, got, tt.ok)
		}
	}
	if got := Bounds[0].Text(); got != "start + 10" {
		t.Errorf("goroutine bound text = %q", got)
	}
	if got := Bounds[2].Text(); got != "start + max(25%, 16.0 MiB)" {
		t.Errorf("rss bound text = %q", got)
	}
}

// snap builds a snapshot of goroutines, fds, rss and heap.
func snap(g, fd, rss, heap float64) Snapshot {
	return Snapshot{"go_goroutines": g, "process_open_fds": fd, "process_resident_memory_bytes": rss, "go_memstats_heap_inuse_bytes": heap}
}

func TestCompare(t *testing.T) {
	const mib = 1 << 20
	per := []Snapshots{
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(22, 33, 90*mib, 50*mib),
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 70*mib, 30*mib)},
		{IdleStart: snap(21, 32, 60*mib, 27*mib), IdleEnd: snap(40, 33, 60*mib, 27*mib), // goroutine leak
			LoadStart: snap(30, 50, 60*mib, 27*mib), LoadEnd: snap(30, 51, 60*mib, 80*mib)}, // heap growth
	}
	rows := Compare(per)
	if len(rows) != 2*(len(Bounds)+len(Infos)) {
		t.Fatalf("Compare: %d rows", len(rows))
	}
	failed := map[string]bool{}
	for _, r := range rows {
		if r.Bound != "" && !r.OK {
			failed[fmt.Sprintf("%s/%s/%d", r.Metric, r.State, r.Instance)] = true
		}
		if r.Bound == "" && !r.OK {
			t.Errorf("reading-only row %+v marked failed", r)
		}
	}
	// Idle memory grew a lot on instance 0, but it is a reading only.
	want := map[string]bool{"go_goroutines/idle/1": true, "go_memstats_heap_inuse_bytes/under load/1": true}
	if fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Fatalf("failed rows = %v, want %v", failed, want)
	}
}
