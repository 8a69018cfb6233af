package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// ErrBed is wrapped by every failure to start, read or stop the test bed.
var ErrBed = errors.New("env: test bed")

// Bed is a running test bed: the addresses and credentials scripts/testbed.sh
// wrote to DIR/env. A Bed is read-only after Up and safe for concurrent use.
type Bed struct {
	Dir      string
	Primary  string // host:port
	Replica  string // host:port
	Redis    string // host:port
	User     string
	Password string
	// PrimaryPIDFile and ReplicaPIDFile hold the mysqld process ids.
	PrimaryPIDFile string
	ReplicaPIDFile string

	script string
	owned  bool // started by Up (not reused), so Down stops it
}

// Up starts a bed in dir with the project's script, or reuses the bed
// already running there. When reuse is false the bed is owned: Down stops it,
// and if this process dies first the script's watchdog takes it down.
func Up(ctx context.Context, root, dir string, reuse bool) (*Bed, error) {
	script := filepath.Join(root, "scripts", "testbed.sh")
	cmd := exec.CommandContext(ctx, script, "up", dir)
	cmd.Env = os.Environ()
	if !reuse {
		cmd.Env = append(cmd.Env, "LOCKPROXY_TESTBED_OWNER_PID="+strconv.Itoa(os.Getpid()))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s up %s: %v\n%s", ErrBed, script, dir, err, tail(out, 2000))
	}
	b, err := ReadBed(dir)
	if err != nil {
		return nil, err
	}
	b.script, b.owned = script, !reuse
	return b, nil
}

// ReadBed parses DIR/env as written by scripts/testbed.sh.
func ReadBed(dir string) (*Bed, error) {
	vars, err := testbed.ReadEnv(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBed, err)
	}
	b := &Bed{
		Dir: dir, Primary: vars["LOCKPROXY_PRIMARY"], Replica: vars["LOCKPROXY_REPLICA"],
		Redis: vars["LOCKPROXY_REDIS"], User: vars["LOCKPROXY_DB_USER"], Password: vars["LOCKPROXY_DB_PASSWORD"],
		PrimaryPIDFile: vars["LOCKPROXY_PRIMARY_PID_FILE"], ReplicaPIDFile: vars["LOCKPROXY_REPLICA_PID_FILE"],
	}
	if b.Primary == "" || b.User == "" {
		return nil, fmt.Errorf("%w: %s/env names no primary or user", ErrBed, dir)
	}
	return b, nil
}

// Down stops the bed if Up started it; a reused bed is left running.
func (b *Bed) Down(ctx context.Context) error {
	if !b.owned {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.script, "down", b.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: down %s: %v\n%s", ErrBed, b.Dir, err, tail(out, 2000))
	}
	return nil
}

// PrimaryPID returns the primary mysqld's process id.
func (b *Bed) PrimaryPID() (int, error) { return readPID(b.PrimaryPIDFile) }

// ReplicaPID returns the replica mysqld's process id.
func (b *Bed) ReplicaPID() (int, error) { return readPID(b.ReplicaPIDFile) }

func readPID(file string) (int, error) {
	if file == "" {
		return 0, fmt.Errorf("%w: the env file names no pid file", ErrBed)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBed, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrBed, file, err)
	}
	return pid, nil
}

// DSN is a go-sql-driver DSN for addr with the bed's credentials.
func (b *Bed) DSN(addr, db string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?interpolateParams=false", b.User, b.Password, addr, db)
}

// HostPort splits addr into host and numeric port.
func HostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("env: %q has no port", addr)
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("env: %q: bad port: %w", addr, err)
	}
	return addr[:i], p, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
