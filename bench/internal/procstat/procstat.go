package procstat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrFormat is wrapped when a /proc file does not read as expected.
var ErrFormat = errors.New("procstat: unexpected /proc format")

// clockTick is USER_HZ, 100 on every Linux platform Go supports.
const clockTick = 100

// Mem is a process's resident memory in bytes.
type Mem struct {
	RSS uint64 // VmRSS: resident now
	HWM uint64 // VmHWM: peak resident since the process started
}

// ReadMem reads VmRSS and VmHWM from /proc/<pid>/status.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, fmt.Errorf("procstat: %w", err)
	}
	return parseStatus(string(b))
}

func parseStatus(s string) (Mem, error) {
	var m Mem
	var found int
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.RSS, found = kb*1024, found+1
		case "VmHWM:":
			m.HWM, found = kb*1024, found+1
		}
	}
	if found != 2 {
		return m, fmt.Errorf("%w: status lacks VmRSS or VmHWM", ErrFormat)
	}
	return m, nil
}

// CPUTime returns the user+system CPU time the process has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) after the command name,
// which may itself hold spaces and parentheses.
func parseStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat has no command", ErrFormat)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14 -> f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat too short", ErrFormat)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: stat utime/stime", ErrFormat)
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// HostCPU is a snapshot of the host's aggregate CPU counters (/proc/stat).
type HostCPU struct {
	Busy, Total uint64 // clock ticks
}

// ReadHostCPU reads the "cpu" line of /proc/stat.
func ReadHostCPU() (HostCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return HostCPU{}, fmt.Errorf("procstat: %w", err)
	}
	return parseHostCPU(string(b))
}

func parseHostCPU(s string) (HostCPU, error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return HostCPU{}, fmt.Errorf("%w: /proc/stat first line", ErrFormat)
	}
	var h HostCPU
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return HostCPU{}, fmt.Errorf("%w: /proc/stat value %q", ErrFormat, v)
		}
		h.Total += n
		if i != 3 && i != 4 { // idle, iowait
			h.Busy += n
		}
	}
	return h, nil
}

// BusyShare is the fraction of host CPU busy between two snapshots (0..1).
func BusyShare(from, to HostCPU) float64 {
	if to.Total <= from.Total {
		return 0
	}
	return float64(to.Busy-from.Busy) / float64(to.Total-from.Total)
}

// TreeCPUTime returns the user+system CPU time of the process, of the
// children it has reaped (cutime, cstime) and of its live children and
// their descendants. A server that forks one child per connection (socat
// with fork) spends its CPU in children: a child still running at both ends
// of a measurement is counted live both times, and one that exits and is
// reaped in between moves from the live sum to the reaped one.
func TreeCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	st, err := parseStatTree(string(b))
	if err != nil {
		return 0, err
	}
	total := st.own + st.reaped
	kids, err := childrenByParent()
	if err != nil {
		return 0, err
	}
	todo := append([]int(nil), kids[pid]...)
	for len(todo) > 0 {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue // gone meanwhile: its time is in the parent's reaped sum
		}
		if cs, err := parseStatTree(string(raw)); err == nil {
			total += cs.own + cs.reaped
		}
		todo = append(todo, kids[c]...)
	}
	return total, nil
}

// statTree is what TreeCPUTime reads from one stat line.
type statTree struct {
	ppid        int
	own, reaped time.Duration
}

// parseStatTree reads ppid (field 4), utime+stime (14, 15) and
// cutime+cstime (16, 17).
func parseStatTree(s string) (statTree, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return statTree{}, fmt.Errorf("%w: stat has no command", ErrFormat)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return statTree{}, fmt.Errorf("%w: stat too short", ErrFormat)
	}
	var v [5]uint64
	for k, idx := range []int{1, 11, 12, 13, 14} {
		n, err := strconv.ParseUint(f[idx], 10, 64)
		if err != nil {
			return statTree{}, fmt.Errorf("%w: stat field %d: %q", ErrFormat, idx+3, f[idx])
		}
		v[k] = n
	}
	tick := func(n uint64) time.Duration { return time.Duration(n) * time.Second / clockTick }
	return statTree{ppid: int(v[0]), own: tick(v[1] + v[2]), reaped: tick(v[3] + v[4])}, nil
}

// childrenByParent maps every process id to its children's, from /proc.
func childrenByParent() (map[int][]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("procstat: %w", err)
	}
	out := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st, err := parseStatTree(string(raw))
		if err != nil {
			continue
		}
		out[st.ppid] = append(out[st.ppid], pid)
	}
	return out, nil
}
