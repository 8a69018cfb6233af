package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// Names the run creates on the bed.
const (
	saleDB      = "hostile_sale"
	plainUser   = "hostile_noprocess"
	plainPass   = "hostile-noprocess-pw"
	memoryLimit = 512 << 20 // proxy.memory_budget of the run
)

// target is the lockproxy process under attack.
type target struct {
	addr, admin string
	dir         string
	cmd         *exec.Cmd
	exited      chan error
	bed         *env.Bed
}

// prepareBed creates the sale's schema and the user without PROCESS.
func prepareBed(ctx context.Context, bed *env.Bed) error {
	db, err := sql.Open("mysql", bed.DSN(bed.Primary, ""))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + saleDB,
		"CREATE DATABASE " + saleDB,
		"CREATE TABLE " + saleDB + ".sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE " + saleDB + ".orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku_id BIGINT NOT NULL, buyer VARCHAR(64) NOT NULL)",
		"CREATE TABLE " + saleDB + ".restocks (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount INT NOT NULL)",
		fmt.Sprintf("INSERT INTO %s.sku VALUES (1, %d), (999, 0)", saleDB, initialStock),
		"CREATE USER IF NOT EXISTS '" + plainUser + "'@'%' IDENTIFIED BY '" + plainPass + "'",
		"GRANT SELECT, INSERT, UPDATE ON " + saleDB + ".* TO '" + plainUser + "'@'%'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// startTarget writes the config and starts lockproxy under a file
// descriptor limit of nofile.
func startTarget(ctx context.Context, e *env.Env, nofile int) (*target, error) {
	ports, err := env.FreePorts(2)
	if err != nil {
		return nil, err
	}
	t := &target{addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), admin: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		dir: e.WorkDir, bed: e.Bed, exited: make(chan error, 1)}
	cfg := fmt.Sprintf(`proxy:
  listen: %s
  memory_budget: %d
admin:
  listen: %s
users:
  - user: %q
    password: %q
  - user: %q
    password: %q
backends:
  primary: %s
  replicas: [%s]
locks:
  backend: redis
  redis:
    addrs: [%s]
rules:
  - name: sale
    table: %s.sku
    key: [sku_id]
`, t.addr, memoryLimit, t.admin, e.Bed.User, e.Bed.Password, plainUser, plainPass, e.Bed.Primary, e.Bed.Replica, e.Bed.Redis, saleDB)
	path := filepath.Join(t.dir, "hostile.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(t.logPath())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// exec keeps the pid: the shell only lowers the limit first.
	t.cmd = exec.Command("/bin/sh", "-c", fmt.Sprintf("ulimit -n %d && exec \"$0\" --config \"$1\" --log-format json --log-level info", nofile),
		e.Binary, path)
	t.cmd.Stdout, t.cmd.Stderr = logf, logf
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { t.exited <- t.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := t.alive(); err != nil {
			return nil, err
		}
		if resp, err := http.Get("http://" + t.admin + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return t, nil
			}
		}
		if time.Now().After(deadline) {
			t.stop()
			return nil, errors.New("lockproxy not ready after 30s")
		}
		select {
		case <-ctx.Done():
			t.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *target) logPath() string { return filepath.Join(t.dir, "lockproxy.log") }

// alive fails once the process has exited.
func (t *target) alive() error {
	select {
	case err := <-t.exited:
		t.exited <- err
		return fmt.Errorf("lockproxy exited: %v", err)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to 40s, then kills.
func (t *target) stop() {
	if t.alive() != nil {
		return
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-t.exited:
	case <-time.After(40 * time.Second):
		_ = t.cmd.Process.Kill()
		err = <-t.exited
	}
	t.exited <- err
}

// rssMiB reads the process's resident memory.
func (t *target) rssMiB() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", t.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// metrics scrapes the admin /metrics for the series named.
func (t *target) metrics(names ...string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + t.admin + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if strings.HasPrefix(line, n+" ") || strings.HasPrefix(line, n+"{") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				out[n] += v
			}
		}
	}
	return out
}

// panics counts log lines that mention a panic.
func (t *target) panics() (int, []string) {
	f, err := os.Open(t.logPath())
	if err != nil {
		return -1, nil
	}
	defer f.Close()
	n := 0
	var first []string
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if strings.Contains(line, "panic") {
			n++
			if len(first) < 3 {
				first = append(first, truncate(line, 400))
			}
		}
		if err == io.EOF {
			return n, first
		}
		if err != nil {
			return n, first
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
