package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ErrShared is returned by helpers that stop, kill or restart servers, or
// stop replication, when the bed is shared with other test processes.
var ErrShared = errors.New("testbed: bed is shared with other test processes; use testbed.Private for a test that breaks servers")

// ErrUnavailable wraps every reason a bed could not be had.
var ErrUnavailable = errors.New("testbed: no test bed")

// Bed is a running set of test servers. Its fields are set once when the bed
// is opened and never change, so a *Bed may be used from many goroutines;
// the helpers that change server state must not race with each other.
type Bed struct {
	// Dir is the directory scripts/testbed.sh keeps the bed in.
	Dir string
	// PrimaryAddr, ReplicaAddr and RedisAddr are host:port on 127.0.0.1.
	PrimaryAddr, ReplicaAddr, RedisAddr string
	// User and Password have all privileges on both MariaDB servers over
	// TCP from 127.0.0.1.
	User, Password string
	// TLSUser has the same password and privileges as User, but MariaDB
	// requires it to connect with TLS (REQUIRE SSL). TLSCA is the CA that
	// signed the certificate every server of the bed presents, for
	// 127.0.0.1 and localhost (TLSCert and TLSKey, its certificate and key).
	TLSUser, TLSCA, TLSCert, TLSKey string
	// Shared is true when other test processes may use the bed at the same
	// time; destructive helpers then return ErrShared.
	Shared bool

	env map[string]string
}

const (
	startTimeout   = 3 * time.Minute  // one `up`
	installTimeout = 20 * time.Minute // apt-get on a fresh machine
)

// The bed of this test binary: opened by the first Get, stopped by Main.
var (
	current struct {
		once  sync.Once
		bed   *Bed
		err   error
		owned bool // started by this process, so Main stops it
	}
)

// Main is for TestMain: it runs m.Run() and then stops the private bed, if
// Get started one, returning the exit code for os.Exit. The bed itself is
// opened by the first Get: the one named by $LOCKPROXY_TESTBED, or else a
// private one in a temporary directory (installing missing servers first).
func Main(m *testing.M) int {
	code := m.Run()
	if current.owned && current.bed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := current.bed.destroy(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Get returns the bed of this test binary, opening it on first use. If no
// bed can be had it calls t.Fatal under CI=true and t.Skip otherwise, with
// the reason. Get is safe for concurrent use.
func Get(t testing.TB) *Bed {
	t.Helper()
	current.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), installTimeout+startTimeout)
		defer cancel()
		current.bed, current.owned, current.err = open(ctx)
	})
	if current.err != nil {
		unavailable(t, current.err)
	}
	return current.bed
}

// Private starts a bed for t alone, stopped and removed when t ends. Use it
// for tests that stop, kill or restart servers. It fails or skips like Get
// when no bed can be started.
func Private(t testing.TB) *Bed {
	t.Helper()
	return PrivateWith(t, Options{})
}

// Options are how a private bed's servers differ from the default.
type Options struct {
	// PerformanceSchema turns MariaDB's performance_schema on (off by
	// default, to keep the servers small), for tests that read it.
	PerformanceSchema bool
}

// PrivateWith is Private with servers set up as o says.
func PrivateWith(t testing.TB, o Options) *Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout+startTimeout)
	defer cancel()
	b, err := startPrivate(ctx, o)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.destroy(ctx); err != nil {
			t.Error(err)
		}
	})
	return b
}

// open returns the bed named by $LOCKPROXY_TESTBED, or starts a private one.
func open(ctx context.Context) (b *Bed, owned bool, err error) {
	if dir := os.Getenv("LOCKPROXY_TESTBED"); dir != "" {
		b, err := openShared(ctx, dir)
		return b, false, err
	}
	b, err = startPrivate(ctx, Options{})
	return b, err == nil, err
}

// openShared loads a bed someone else started and checks it answers.
func openShared(ctx context.Context, dir string) (*Bed, error) {
	b, err := load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: LOCKPROXY_TESTBED=%s: %w", ErrUnavailable, dir, err)
	}
	b.Shared = true
	if err := b.reachable(ctx); err != nil {
		return nil, fmt.Errorf("%w: LOCKPROXY_TESTBED=%s: %w (is `scripts/testbed.sh up %s` still running?)",
			ErrUnavailable, dir, err, dir)
	}
	return b, nil
}

// unavailable fails t under CI and skips it elsewhere.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if inCI() {
		t.Fatalf("%v (CI=%s: a missing test bed is a failure)", err, os.Getenv("CI"))
	}
	t.Skipf("skipped: %v", err)
}

// inCI reports whether $CI says this is a CI run.
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}
