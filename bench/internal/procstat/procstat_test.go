package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Mem
		wantErr bool
	}{
		{"both", "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n", Mem{RSS: 1 << 20, HWM: 2 << 20}, false},
		{"no hwm", "VmRSS:\t  1024 kB\n", Mem{}, true},
		{"empty", "", Mem{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatus(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Fatalf("parseStatus = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	// The command name holds a space and a parenthesis.
	line := "1234 (lock proxy) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0"
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("parseStat = %v, want %v", got, want)
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Fatal("want an error")
	}
}

func TestHostCPU(t *testing.T) {
	a, err := parseHostCPU("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if a.Busy != 200 || a.Total != 1000 {
		t.Fatalf("parseHostCPU = %+v", a)
	}
	b := HostCPU{Busy: 700, Total: 2000}
	if got := BusyShare(a, b); got != 0.5 {
		t.Fatalf("BusyShare = %v, want 0.5", got)
	}
	if _, err := parseHostCPU("intr 1 2"); err == nil {
		t.Fatal("want an error")
	}
}

func TestSelfReadings(t *testing.T) {
	pid := os.Getpid()
	m, err := ReadMem(pid)
	if err != nil || m.RSS == 0 || m.HWM < m.RSS {
		t.Fatalf("ReadMem(self) = %+v, %v", m, err)
	}
	if _, err := CPUTime(pid); err != nil {
		t.Fatal(err)
	}
	s := StartSampler(pid, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	samples, peak, err := s.Stop()
	if err != nil || len(samples) < 2 || peak == 0 {
		t.Fatalf("sampler: %d samples, peak %d, err %v", len(samples), peak, err)
	}
}

func TestParseStatTree(t *testing.T) {
	line := "77 (socat) S 42 77 77 0 -1 4194560 100 0 0 0 250 50 120 30 20 0 1 0 100 0 0"
	got, err := parseStatTree(line)
	if err != nil {
		t.Fatal(err)
	}
	if got.ppid != 42 || got.own != 3*time.Second || got.reaped != 1500*time.Millisecond {
		t.Fatalf("parseStatTree = %+v", got)
	}
	if _, err := parseStatTree("1 (x) S 1 2 3"); err == nil {
		t.Fatal("want an error for a short line")
	}
}

// TestTreeCPUTimeCountsChildren runs a child that burns CPU and sees its
// time in this process's tree, first live and then, once reaped, still.
func TestTreeCPUTimeCountsChildren(t *testing.T) {
	self := os.Getpid()
	base, err := TreeCPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; sleep 30`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	own := func() time.Duration { d, _ := CPUTime(self); return d }
	deadline := time.Now().Add(20 * time.Second)
	var tree time.Duration
	for {
		if tree, err = TreeCPUTime(self); err != nil {
			t.Fatal(err)
		}
		if tree-own() >= 100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live child not counted: tree %v, own %v, base %v", tree, own(), base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	after, err := TreeCPUTime(self)
	if err != nil {
		t.Fatal(err)
	}
	// Tick rounding differs between a live child's figures and the reaped
	// sums, so allow for a few ticks.
	if after-own() < 50*time.Millisecond {
		t.Fatalf("reaped child not counted: tree %v, own %v", after, own())
	}
}
