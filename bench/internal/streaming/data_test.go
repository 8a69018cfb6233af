package streaming

import (
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/procstat"
)

const mib = 1 << 20

func TestGrowth(t *testing.T) {
	tests := []struct {
		name string
		run  Run
		want uint64
	}{
		{"sampled peak", Run{BaselineRSS: 10 * mib, PeakRSS: 14 * mib, BaselineHWM: 10 * mib, EndHWM: 14 * mib}, 4 * mib},
		{"peak between samples", Run{BaselineRSS: 10 * mib, PeakRSS: 12 * mib, BaselineHWM: 10 * mib, EndHWM: 20 * mib}, 10 * mib},
		{"startup peak above baseline", Run{BaselineRSS: 10 * mib, PeakRSS: 11 * mib, BaselineHWM: 15 * mib, EndHWM: 15 * mib}, 1 * mib},
		{"shrank", Run{BaselineRSS: 10 * mib, PeakRSS: 9 * mib, BaselineHWM: 10 * mib, EndHWM: 10 * mib}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := growth(tt.run); got != tt.want {
				t.Fatalf("growth = %d MiB, want %d MiB", got/mib, tt.want/mib)
			}
		})
	}
}

func TestDownsampleKeepsPeak(t *testing.T) {
	var ss []procstat.Sample
	for i := range 1000 {
		ss = append(ss, procstat.Sample{At: time.Duration(i) * 10 * time.Millisecond, RSS: 10 * mib})
	}
	ss[333].RSS = 50 * mib
	got := downsample(ss, 100)
	if len(got) > 103 {
		t.Fatalf("downsample kept %d points, want about 100", len(got))
	}
	peak := 0.0
	for _, p := range got {
		peak = max(peak, p.RSSMB)
	}
	if peak != 50 {
		t.Fatalf("peak lost: max %v MiB", peak)
	}
	if last := got[len(got)-1]; last.At != ss[999].At.Seconds() {
		t.Fatalf("last sample lost: %+v", last)
	}
}

func TestSummarizeAndTargets(t *testing.T) {
	d := Data{Rows: 1000, Runs: []Run{
		{Path: Direct, Reader: Fast, Seconds: 2, Bytes: 5e6},
		{Path: Proxy, Reader: Fast, Seconds: 3, Growth: 4 * mib, BaselineRSS: 12 * mib},
		{Path: Proxy, Reader: Fast, Seconds: 3, Growth: 40 * mib, BaselineRSS: 12 * mib},
		{Path: Proxy, Reader: Slow, Seconds: 9, Growth: 2 * mib, BaselineRSS: 12 * mib},
	}}
	d.summarize()
	if d.TimeRatio != 1.5 || d.FastGrowthMB != 40 || d.SlowGrowthMB != 2 || d.BaselineMB != 12 {
		t.Fatalf("summarize = %+v", d)
	}
	ts := d.targets()
	if len(ts) != 2 || ts[0].Met || !ts[1].Met {
		t.Fatalf("targets = %+v: the fast reader's worst run must miss, the slow one meet", ts)
	}
}
