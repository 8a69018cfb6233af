package manyclients

import "testing"

// TestSummary: the ratio pairs runs of the same round, and the targets
// fail a multiplexed run that saw more connections than its pool or
// had errors.
func TestSummary(t *testing.T) {
	d := Data{Clients: 1000, Busy: 64, PoolMax: 200, Runs: []Run{
		{Round: 1, Mode: Multiplexed, OpsPerSec: 900, BackendPeak: 180},
		{Round: 1, Mode: Pinned, OpsPerSec: 1000, BackendPeak: 1001},
		{Round: 2, Mode: Pinned, OpsPerSec: 500, BackendPeak: 1001},
		{Round: 2, Mode: Multiplexed, OpsPerSec: 600, BackendPeak: 190},
		{Round: 3, Mode: Multiplexed, OpsPerSec: 950, BackendPeak: 200},
		{Round: 3, Mode: Pinned, OpsPerSec: 1000, BackendPeak: 1001},
	}}
	d.summarize()
	if d.Ratio != 0.95 || d.MuxPeak != 200 || d.PinnedPeak != 1001 {
		t.Fatalf("ratio %v, peaks %d / %d", d.Ratio, d.MuxPeak, d.PinnedPeak)
	}
	for _, tg := range d.targets() {
		if !tg.Met {
			t.Errorf("%s: %s, want %s", tg.Name, tg.Got, tg.Want)
		}
	}
	d.Runs[4].BackendPeak, d.Runs[4].Errors = 201, 1
	d.MuxPeak, d.MuxErrors = 0, 0
	d.summarize()
	for _, tg := range d.targets()[:2] {
		if tg.Met {
			t.Errorf("%s: %s met, want missed", tg.Name, tg.Got)
		}
	}
}
