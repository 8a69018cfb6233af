package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// RepoRoot returns the root of the lockproxy source tree this package was
// built from (located from this file, so it works from any package's test).
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testbed: runtime.Caller failed")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Script returns the path of scripts/testbed.sh.
func Script() string { return filepath.Join(RepoRoot(), "scripts", "testbed.sh") }

// runScript runs scripts/testbed.sh with args and extra environment. The
// error carries the tail of the script's output, which names the log files.
func runScript(ctx context.Context, extraEnv []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{Script()}, args...)...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Dir = RepoRoot()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The servers detach from our pipes; never wait long for a straggler.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("testbed: scripts/testbed.sh %s: %w\n%s",
			strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return out.String(), nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ensureInstalled runs `testbed.sh install` when `check` finds something
// missing.
func ensureInstalled(ctx context.Context) error {
	if _, err := runScript(ctx, nil, "check"); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	_, err := runScript(ctx, nil, "install")
	return err
}

// startPrivate starts a bed in a new temporary directory owned by this
// process: a watchdog stops it and removes the directory if the process
// dies before destroy runs.
func startPrivate(ctx context.Context, o Options) (*Bed, error) {
	if err := ensureInstalled(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// os.TempDir, not t.TempDir: unix socket paths must stay short.
	dir, err := os.MkdirTemp("", "lpbed-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	upCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	env := []string{
		"LOCKPROXY_TESTBED_OWNER_PID=" + strconv.Itoa(os.Getpid()),
		"LOCKPROXY_TESTBED_EPHEMERAL=1",
	}
	if o.PerformanceSchema {
		env = append(env, "LOCKPROXY_TESTBED_PERFORMANCE_SCHEMA=ON")
	}
	_, err = runScript(upCtx, env, "up", dir)
	if err == nil {
		var b *Bed
		if b, err = load(dir); err == nil {
			return b, nil
		}
	}
	down, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	_, _ = runScript(down, nil, "down", dir)
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// destroy stops a bed this process started and removes its directory.
func (b *Bed) destroy(ctx context.Context) error {
	if b.Shared {
		return ErrShared
	}
	_, err := runScript(ctx, nil, "down", b.Dir)
	if err != nil {
		return err
	}
	return os.RemoveAll(b.Dir)
}
