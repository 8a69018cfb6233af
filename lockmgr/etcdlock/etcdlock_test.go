package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// testTTL is etcd's minimum lease (whole seconds, at least about 2s) plus
// room for keep-alives on a loaded machine under -race.
const testTTL = 3 * time.Second

// testOpTimeout bounds each etcd call of the conformance Lockers.
const testOpTimeout = 5 * time.Second

// restartTTL outlasts an etcd restart.
const restartTTL = 5 * time.Second

func prefix() string { return servertest.Unique("lptest-") }

// newLockers makes n Lockers, each with its own client, as n proxy
// instances sharing one etcd. Their calls may take up to testOpTimeout:
// the test etcd syncs every write to a disk that a busy machine shares,
// and 200 contending acquires once took more than the default 1 s there.
func newLockers(t *testing.T, s *server, pfx string, ttl time.Duration, n int) []lockmgr.Locker {
	out := make([]lockmgr.Locker, n)
	for i := range out {
		out[i] = etcdlock.New(s.newClient(t), &etcdlock.Options{TTL: ttl, Prefix: pfx, OpTimeout: testOpTimeout, Logger: zaptest.NewLogger(t)})
	}
	return out
}

func TestConformance(t *testing.T) {
	s := getServer(t)
	pfx := prefix()
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker { return newLockers(t, s, pfx, testTTL, n) },
		TTL:     testTTL,
		Abandon: func(l lockmgr.Locker) { l.(*etcdlock.Locker).Abandon() },
		Restartable: func(t *testing.T) ([]lockmgr.Locker, time.Duration, func()) {
			own := servertest.Own(t, "etcdlock-restart-", startServer, (*server).stop)
			return newLockers(t, own, pfx, restartTTL, 2), restartTTL, func() {
				if err := own.restart(); err != nil {
					t.Fatalf("restart etcd: %v", err)
				}
			}
		},
	})
}

// TestUnavailable: with no etcd at the endpoint, Acquire fails with
// ErrUnavailable (after OpTimeout), not with the caller's wait timeout.
func TestUnavailable(t *testing.T) {
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{client: addr}
	l := etcdlock.New(s.newClient(t), &etcdlock.Options{TTL: testTTL, OpTimeout: 300 * time.Millisecond})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locktest.Unavailable(t, ctx, l, "etcd")
}
