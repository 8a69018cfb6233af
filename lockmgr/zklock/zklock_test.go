package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/zklock"
)

// testTTL is the session timeout: long enough for a loaded machine under
// -race, short enough for the expiry tests to run in seconds.
const testTTL = 3 * time.Second

// restartTTL outlasts a ZooKeeper restart (a JVM start).
const restartTTL = 5 * time.Second

func root() string { return servertest.Unique("/lptest-") }

func newLocker(t testing.TB, addr, root string, ttl time.Duration) *zklock.Locker {
	t.Helper()
	log := zap.NewNop()
	if _, ok := t.(*testing.T); ok {
		log = zaptest.NewLogger(t)
	}
	l, err := zklock.New([]string{addr}, &zklock.Options{TTL: ttl, Root: root, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newLockers(t *testing.T, addr, root string, ttl time.Duration, n int) []lockmgr.Locker {
	out := make([]lockmgr.Locker, n)
	for i := range out {
		out[i] = newLocker(t, addr, root, ttl)
	}
	return out
}

func TestConformance(t *testing.T) {
	s := getServer(t)
	r := root()
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker { return newLockers(t, s.addr, r, testTTL, n) },
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*zklock.Locker).Abandon() },
		Restartable: func(t *testing.T) ([]lockmgr.Locker, time.Duration, func()) {
			own := servertest.Own(t, "zklock-restart-", startServer, (*server).stop)
			return newLockers(t, own.addr, r, restartTTL, 2), restartTTL, func() {
				if err := own.restart(); err != nil {
					t.Fatalf("restart ZooKeeper: %v", err)
				}
			}
		},
	})
}

// TestUnavailable: with no ZooKeeper at the address, Acquire fails with
// ErrUnavailable (after OpTimeout), not with the caller's wait timeout.
func TestUnavailable(t *testing.T) {
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := zklock.New([]string{addr}, &zklock.Options{TTL: testTTL, OpTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locktest.Unavailable(t, ctx, l, "ZooKeeper")
	if err := l.Ping(ctx); !errors.Is(err, lockmgr.ErrUnavailable) {
		t.Errorf("Ping without ZooKeeper: %v; want ErrUnavailable", err)
	}
}

func TestPing(t *testing.T) {
	s := getServer(t)
	l := newLocker(t, s.addr, root(), testTTL)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}
