package sampling

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRenderCSV(t *testing.T) {
	var b bytes.Buffer
	s := Sample{Elapsed: 1500 * time.Millisecond, Phase: PhaseLoad, Instance: 1, HWM: 7, CPUPct: 12.34, HostBusy: 0.5,
		Gauges: map[string]float64{"go_goroutines": 30, "process_resident_memory_bytes": 1 << 20}}
	if err := renderCSV(&b, []Sample{s}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("csv:\n%s", b.String())
	}
	if want := "elapsed_s,instance,phase,go_goroutines,process_open_fds,process_resident_memory_bytes,go_memstats_heap_inuse_bytes," +
		"lockproxy_client_connections,lockproxy_locks_held,lockproxy_lock_waiters,hwm_bytes,cpu_pct,host_busy_pct"; lines[0] != want {
		t.Errorf("header = %q", lines[0])
	}
	if want := "1.5,1,load,30,0,1048576,0,0,0,0,7,12.3,50.0"; lines[1] != want {
		t.Errorf("row = %q, want %q", lines[1], want)
	}
}
