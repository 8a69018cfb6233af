package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// ErrProxy is wrapped by every failure to build, start or stop lockproxy.
var ErrProxy = errors.New("env: lockproxy")

// Build compiles ./cmd/lockproxy of the checkout at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "lockproxy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lockproxy")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go build ./cmd/lockproxy: %v\n%s", ErrProxy, err, tail(out, 4000))
	}
	return bin, nil
}

// ProxyConfig is what varies between the lockproxy instances a scenario
// starts. The zero value is one instance with no rules, the memory lock
// backend and no replica.
type ProxyConfig struct {
	// Locks is the YAML body of the `locks:` section, indented by four
	// spaces per level below it; empty means `backend: memory`.
	Locks string
	// Rules is the YAML list under `rules:`; empty means no rules.
	Rules string
	// WithReplica adds the bed's replica to backends.replicas.
	WithReplica bool
	// MaxConnections is proxy.max_connections; 0 means 4096.
	MaxConnections int
	// Multiplex turns on backends.pool.multiplex, with at most
	// PoolConnections primary connections (0 means 200); without it each
	// session keeps its own connection (multiplex: false), as the stored
	// results of the scenarios that do not say were measured.
	Multiplex       bool
	PoolConnections int
	// GOMAXPROCS, when positive, is the instance's GOMAXPROCS (the cores
	// its goroutines run on at once), as a container's CPU limit sets it;
	// 0 leaves the Go runtime's default (every core of the host).
	GOMAXPROCS int
}

// Proxy is one running lockproxy process. Its methods are not safe for
// concurrent use with Stop.
type Proxy struct {
	Addr      string // MySQL protocol, host:port
	AdminAddr string // HTTP admin, host:port
	Dir       string // config and log live here
	process
}

// StartProxy writes a config for cfg on two free loopback ports into a new
// directory under workDir, starts bin on it and waits until /readyz answers
// 200 from that process.
func StartProxy(ctx context.Context, bin, workDir string, bed *Bed, cfg ProxyConfig) (*Proxy, error) {
	dir, err := os.MkdirTemp(workDir, "lockproxy-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProxy, err)
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), AdminAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		Dir: dir,
	}
	cfgPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfgPath, []byte(renderConfig(p, bed, cfg)), 0o600); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProxy, err)
	}
	logf, err := os.Create(filepath.Join(dir, "lockproxy.log"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProxy, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", cfgPath, "--log-format", "console", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if cfg.GOMAXPROCS > 0 {
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", cfg.GOMAXPROCS))
	}
	if err := p.start(cmd); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrProxy, bin, err)
	}
	if err := p.waitReady(ctx, 30*time.Second); err != nil {
		_ = p.Stop(context.Background())
		return nil, err
	}
	return p, nil
}

func renderConfig(p *Proxy, bed *Bed, cfg ProxyConfig) string {
	var b strings.Builder
	maxConns := cfg.MaxConnections
	if maxConns == 0 {
		maxConns = 4096
	}
	fmt.Fprintf(&b, "proxy:\n  listen: %s\n  max_connections: %d\n", p.Addr, maxConns)
	fmt.Fprintf(&b, "admin:\n  listen: %s\n", p.AdminAddr)
	fmt.Fprintf(&b, "users:\n  - user: %q\n    password: %q\n", bed.User, bed.Password)
	fmt.Fprintf(&b, "backends:\n  primary: %s\n", bed.Primary)
	if cfg.WithReplica && bed.Replica != "" {
		fmt.Fprintf(&b, "  replicas: [%s]\n", bed.Replica)
	}
	if cfg.Multiplex {
		pool := cfg.PoolConnections
		if pool == 0 {
			pool = 200
		}
		fmt.Fprintf(&b, "  pool:\n    multiplex: true\n    max_connections: %d\n", pool)
	} else {
		b.WriteString("  pool:\n    multiplex: false\n")
	}
	locks := cfg.Locks
	if locks == "" {
		locks = "  backend: memory\n"
	}
	fmt.Fprintf(&b, "locks:\n%s", ensureNL(locks))
	if cfg.Rules == "" {
		b.WriteString("rules: []\n")
	} else {
		fmt.Fprintf(&b, "rules:\n%s", ensureNL(cfg.Rules))
	}
	return b.String()
}

func ensureNL(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// waitReady polls the admin /readyz of this process until it answers 200,
// the process exits, or the timeout passes.
func (p *Proxy) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := testbed.AwaitAdmin(ctx, p.AdminAddr, "/readyz", func() (bool, error) { return p.waitExit(ctx, 0) })
		if err != nil {
			return fmt.Errorf("%w: not ready within %s: %v; log:\n%s", ErrProxy, timeout, err, p.Log())
		}
		if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			_ = c.Close()
			return p.stillRunning(200 * time.Millisecond)
		}
		select { // ready, but not yet listening for clients
		case <-ctx.Done():
			return fmt.Errorf("%w: not ready after %s; log:\n%s", ErrProxy, timeout, p.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stillRunning makes sure the answers came from this process and not from
// another one on a port it failed to bind: it must outlive d.
func (p *Proxy) stillRunning(d time.Duration) error {
	if ended, err := p.waitExit(context.Background(), d); ended {
		return fmt.Errorf("%w: exited right after start (%v); log:\n%s", ErrProxy, err, p.Log())
	}
	return nil
}

// Log returns the tail of the instance's log.
func (p *Proxy) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "lockproxy.log"))
	return tail(b, 4000)
}

// Stop sends SIGTERM, waits for the process to exit (SIGKILL after 10 s)
// and returns an error only if it had to be killed.
func (p *Proxy) Stop(ctx context.Context) error {
	if p.stop(ctx) {
		return fmt.Errorf("%w: pid %d did not exit on SIGTERM, killed", ErrProxy, p.PID)
	}
	return nil
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago. Another process may still take one before it is used; StartProxy
// detects that because the instance then fails to start or get ready.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("%w: free port: %v", ErrProxy, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
