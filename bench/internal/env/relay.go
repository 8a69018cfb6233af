package env

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/procstat"
)

// ErrRelay is wrapped by every failure to build, start or stop a relay.
var ErrRelay = errors.New("env: relay")

// The relays a scenario can put in front of the primary: TCP relays that
// parse nothing, the floor for any proxy on this host.
const (
	// GoRelay is bench/cmd/relay: accept, dial, io.Copy both ways.
	GoRelay = "bare Go relay"
	// Socat is `socat TCP-LISTEN:PORT,fork,reuseaddr,nodelay,bind=127.0.0.1
	// TCP:HOST:PORT,nodelay`, a C relay forking one process per connection.
	Socat = "socat relay"
	// LockingGoRelay is bench/cmd/relay -txn-lock: the bare Go relay
	// holding one in-memory lock from a client's SELECT until the answer to
	// its COMMIT, the floor for a proxy that locks outside the database.
	LockingGoRelay = "bare Go relay with an in-memory lock"
)

// BuildRelay compiles ./bench/cmd/relay of the checkout at root into dir
// and returns the binary's path.
func BuildRelay(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "relay")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/cmd/relay")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go build ./bench/cmd/relay: %v\n%s", ErrRelay, err, tail(out, 4000))
	}
	return bin, nil
}

// Relay is one running relay process in front of Target. Its methods are
// not safe for concurrent use with Stop.
type Relay struct {
	Kind   string // GoRelay or Socat
	Addr   string // where clients connect, host:port
	Target string // where it relays to
	Dir    string // its log lives here
	process
}

// StartRelay starts a relay of kind (GoRelay, LockingGoRelay or Socat) in
// front of target; see StartGoRelay and StartSocat.
func (e *Env) StartRelay(ctx context.Context, kind, target string) (*Relay, error) {
	switch kind {
	case GoRelay:
		return StartGoRelay(ctx, e.RelayBinary, e.WorkDir, target)
	case LockingGoRelay:
		return startGoRelay(ctx, kind, e.RelayBinary, e.WorkDir, target, "-txn-lock")
	case Socat:
		return StartSocat(ctx, e.WorkDir, target)
	default:
		return nil, fmt.Errorf("%w: unknown kind %q", ErrRelay, kind)
	}
}

// StartGoRelay starts bin (bench/cmd/relay) on a free loopback port in
// front of target, reads the address it announces and waits until it
// accepts a connection.
func StartGoRelay(ctx context.Context, bin, workDir, target string) (*Relay, error) {
	return startGoRelay(ctx, GoRelay, bin, workDir, target)
}

// startGoRelay is StartGoRelay for a relay of kind with extra flags.
func startGoRelay(ctx context.Context, kind, bin, workDir, target string, flags ...string) (*Relay, error) {
	if bin == "" {
		return nil, fmt.Errorf("%w: no relay binary was built (env.BuildRelay)", ErrRelay)
	}
	r, logf, err := newRelay(kind, workDir, target)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRelay, err)
	}
	defer pr.Close()
	cmd := exec.Command(bin, append([]string{"-listen", "127.0.0.1:0", "-to", target}, flags...)...)
	cmd.Stdout, cmd.Stderr = pw, logf
	err = r.start(cmd)
	_ = pw.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrRelay, bin, err)
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case r.Addr = <-addr:
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	if r.Addr == "" {
		_ = r.Stop(context.Background())
		return nil, fmt.Errorf("%w: %s announced no address; log:\n%s", ErrRelay, bin, r.Log())
	}
	if err := r.waitAccepting(ctx, 10*time.Second); err != nil {
		_ = r.Stop(context.Background())
		return nil, err
	}
	return r, nil
}

// StartSocat starts socat on a free loopback port in front of target and
// waits until it accepts a connection. socat missing from PATH is an error
// that says how to install it.
func StartSocat(ctx context.Context, workDir, target string) (*Relay, error) {
	bin, err := exec.LookPath("socat")
	if err != nil {
		return nil, fmt.Errorf("%w: socat is not installed (scripts/testbed.sh install installs it): %v", ErrRelay, err)
	}
	host, port, err := HostPort(target)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRelay, err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	r, logf, err := newRelay(Socat, workDir, target)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r.Addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(bin, fmt.Sprintf("TCP-LISTEN:%d,fork,reuseaddr,nodelay,bind=127.0.0.1", ports[0]), fmt.Sprintf("TCP:%s:%d,nodelay", host, port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := r.start(cmd); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrRelay, bin, err)
	}
	if err := r.waitAccepting(ctx, 10*time.Second); err != nil {
		_ = r.Stop(context.Background())
		return nil, err
	}
	return r, nil
}

// newRelay makes the relay's directory and log file.
func newRelay(kind, workDir, target string) (*Relay, *os.File, error) {
	dir, err := os.MkdirTemp(workDir, "relay-")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrRelay, err)
	}
	logf, err := os.Create(filepath.Join(dir, "relay.log"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrRelay, err)
	}
	return &Relay{Kind: kind, Target: target, Dir: dir}, logf, nil
}

// waitAccepting dials the relay until it answers, the process exits or the
// timeout passes; the process must then outlive a moment, so the answer
// did not come from another process on a port this one failed to bind.
func (r *Relay) waitAccepting(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if ended, err := r.waitExit(ctx, 0); ended {
			return fmt.Errorf("%w: %s exited before accepting (%v); log:\n%s", ErrRelay, r.Kind, err, r.Log())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s not accepting on %s after %s; log:\n%s", ErrRelay, r.Kind, r.Addr, timeout, r.Log())
		case <-time.After(20 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", r.Addr, time.Second)
		if err != nil {
			continue
		}
		_ = c.Close()
		if ended, err := r.waitExit(context.Background(), 200*time.Millisecond); ended {
			return fmt.Errorf("%w: %s exited right after start (%v); log:\n%s", ErrRelay, r.Kind, err, r.Log())
		}
		return nil
	}
}

// Log returns the tail of the relay's log.
func (r *Relay) Log() string {
	b, _ := os.ReadFile(filepath.Join(r.Dir, "relay.log"))
	return tail(b, 4000)
}

// CPUTime is the CPU the relay has used, its children's included (socat
// forks one per connection).
func (r *Relay) CPUTime() (time.Duration, error) {
	return procstat.TreeCPUTime(r.PID)
}

// Stop sends SIGTERM to the relay's process group (socat's per-connection
// children included), waits for the relay to exit (SIGKILL to the group
// after 10 s) and returns an error only if it had to be killed.
func (r *Relay) Stop(ctx context.Context) error {
	if r.stop(ctx) {
		return fmt.Errorf("%w: %s pid %d did not exit on SIGTERM, killed", ErrRelay, r.Kind, r.PID)
	}
	return nil
}
