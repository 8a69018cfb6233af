package gobench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Args are go test's arguments for one round of spec.
func Args(spec Spec, benchtime string) []string {
	names := make([]string, len(spec.Benches))
	for i, b := range spec.Benches {
		names[i] = regexp.QuoteMeta(b)
	}
	return []string{"test", "-run", "^$", "-bench", "^(" + strings.Join(names, "|") + ")$",
		"-benchtime", benchtime, "-count", "1", "-v", "-timeout", "10m", spec.Pkg}
}

// invoke runs go test once for spec in root with LOCKPROXY_TESTBED=bedDir,
// retrying after pl.retryWait while the package does not build (another
// change may be half-way through). A benchmark that fails or skips is
// recorded, not an error; only a cancelled ctx is.
func invoke(ctx context.Context, root, bedDir string, spec Spec, pl plan, logf func(string, ...any)) (Invocation, error) {
	inv := Invocation{Pkg: spec.Pkg, Args: Args(spec, pl.benchtime)}
	var earlier []string
	for attempt := 1; attempt <= pl.attempts; attempt++ {
		inv.Attempts = attempt
		res := runOnce(ctx, root, bedDir, inv.Args, pl.timeout)
		if ctx.Err() != nil {
			return inv, fmt.Errorf("gobench: %s: %w", spec.Pkg, ctx.Err())
		}
		inv.Seconds, inv.HostBusy, inv.LoadAvg = res.took.Seconds(), res.busy, res.load
		parsed, perr := Parse(bytes.NewReader(res.out))
		inv.Lines, inv.Ended = parsed.Lines, parsed.Ended
		inv.OK = res.err == nil && perr == nil
		inv.Error = ""
		if !inv.OK {
			inv.Error = Summarize(res.out, res.err, perr)
		}
		if inv.OK || !BuildFailed(res.out) || attempt == pl.attempts {
			break
		}
		earlier = append(earlier, fmt.Sprintf("attempt %d at %s: %s", attempt, time.Now().UTC().Format("15:04:05"), firstLine(inv.Error)))
		logf("gobench: %s does not build (attempt %d of %d); retrying in %s: %s", spec.Pkg, attempt, pl.attempts, pl.retryWait, firstLine(inv.Error))
		select {
		case <-ctx.Done():
			return inv, fmt.Errorf("gobench: %s: %w", spec.Pkg, ctx.Err())
		case <-time.After(pl.retryWait):
		}
	}
	if len(earlier) > 0 {
		inv.Error = strings.TrimSpace(inv.Error + "\nearlier: " + strings.Join(earlier, "; "))
	}
	return inv, nil
}

// ran is one go test process as it went.
type ran struct {
	out  []byte // stdout and stderr
	err  error  // from the process
	took time.Duration
	busy float64 // host CPU busy share while it ran
	load string  // load average at its start
}

// runOnce runs go with args in root against the bed in bedDir.
func runOnce(ctx context.Context, root, bedDir string, args []string, timeout time.Duration) ran {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "LOCKPROXY_TESTBED="+bedDir)
	cmd.WaitDelay = 10 * time.Second
	load := results.LoadAvg()
	cpu0, _ := procstat.ReadHostCPU()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	cpu1, _ := procstat.ReadHostCPU()
	return ran{out: out, err: err, took: took, busy: procstat.BusyShare(cpu0, cpu1), load: load}
}

// BuildFailed reports whether go test's output says a package did not
// build (or its test setup failed), as opposed to a benchmark failing.
func BuildFailed(out []byte) bool {
	return bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]"))
}

// Summarize is one line saying why go test failed, then the tail of its
// output.
func Summarize(out []byte, runErr, parseErr error) string {
	head := ""
	for _, l := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "panic:") || strings.HasPrefix(t, "--- FAIL") {
			head = t
			break
		}
	}
	switch {
	case parseErr != nil:
		head = parseErr.Error()
	case head == "" && runErr != nil:
		head = runErr.Error()
	}
	s := string(out)
	if len(s) > 3000 {
		s = "…" + s[len(s)-3000:]
	}
	return strings.TrimSpace(head + "\n" + s)
}
