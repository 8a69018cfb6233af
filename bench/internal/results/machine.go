package results

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where and against what a result was measured.
type Machine struct {
	NProc        int    `json:"nproc"`
	CPUModel     string `json:"cpu_model"`
	MemTotalMB   int    `json:"mem_total_mb"`
	Kernel       string `json:"kernel"`
	GoVersion    string `json:"go_version"`
	MariaDB      string `json:"mariadb"`
	Redis        string `json:"redis"`
	Sysbench     string `json:"sysbench"`
	Commit       string `json:"lockproxy_commit"`
	CommitDirty  bool   `json:"lockproxy_tree_dirty"`
	Binary       string `json:"lockproxy_binary,omitempty"` // set when a prebuilt binary was used
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
}

// LocalMachine fills what can be learnt from this host and the git checkout
// at root; the database versions are left to the caller. Probes that fail
// leave their field empty: a missing figure is better than no result.
func LocalMachine(ctx context.Context, root string) Machine {
	m := Machine{
		NProc:        runtime.NumCPU(),
		CPUModel:     cpuModel("/proc/cpuinfo"),
		MemTotalMB:   memTotalMB("/proc/meminfo"),
		Kernel:       strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		GoVersion:    firstLine(ctx, root, "go", "version"),
		Sysbench:     firstLine(ctx, root, "sysbench", "--version"),
		Commit:       firstLine(ctx, root, "git", "rev-parse", "HEAD"),
		LoadAvgStart: LoadAvg(),
	}
	if out := firstLine(ctx, root, "nproc"); out != "" {
		if n, err := strconv.Atoi(out); err == nil {
			m.NProc = n
		}
	}
	m.CommitDirty = firstLine(ctx, root, "git", "status", "--porcelain", "--untracked-files=no") != ""
	return m
}

// LoadAvg returns the first three fields of /proc/loadavg.
func LoadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotalMB(path string) int {
	for _, line := range strings.Split(readFile(path), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return 0
}

// firstLine runs a command in dir with a bounded time and returns the first
// line of its output, or "" on any failure.
func firstLine(ctx context.Context, dir, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}
