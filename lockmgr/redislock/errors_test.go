package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// TestClassify: when the caller's time ran out, a call cut short by that
// deadline is a wait timeout (1205), but a refused or reset connection
// still says the lock service is down (1105).
func TestClassify(t *testing.T) {
	k := lockmgr.Key{Name: "db.t/1", Rule: "r"}
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	refused := fmt.Errorf("dial tcp 127.0.0.1:6390: connect: %w", syscall.ECONNREFUSED)
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"deadline, call cut short", expired, context.DeadlineExceeded, lockmgr.ErrWaitTimeout},
		{"deadline, connection refused", expired, refused, lockmgr.ErrUnavailable},
		{"live, connection refused", context.Background(), refused, lockmgr.ErrUnavailable},
		{"live, server loading", context.Background(), errors.New("LOADING Redis is loading the dataset in memory"), lockmgr.ErrUnavailable},
		{"deadline, after a try Redis did not answer", expired, wentAway{timeout}, lockmgr.ErrUnavailable},
	} {
		if got := classify(c.ctx, k, c.err); !errors.Is(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestTwice: a call that failed for want of Redis is made once more; when
// the wait runs out in that second call, what the caller hears is the
// first failure, an outage (1105, or 1205 naming the lock service), not a
// wait that merely timed out.
func TestTwice(t *testing.T) {
	k := lockmgr.Key{Name: "db.t/1", Rule: "r"}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := twice(ctx, func() (bool, error) {
		calls++
		if calls == 1 {
			return false, timeout
		}
		cancel() // the wait ends in the second call
		return false, context.Canceled
	})
	if calls != 2 {
		t.Fatalf("%d calls, want 2", calls)
	}
	if got := classify(ctx, k, err); !errors.Is(got, lockmgr.ErrUnavailable) || !errors.Is(got, os.ErrDeadlineExceeded) {
		t.Errorf("second call cut short after Redis did not answer the first: %v, want ErrUnavailable naming the first failure", got)
	}
	calls = 0
	_, err = twice(context.Background(), func() (bool, error) {
		calls++
		return false, errors.New("ERR wrong number of arguments")
	})
	if calls != 1 || err == nil {
		t.Errorf("a call Redis refused as wrong: %d calls, %v; want 1 call and its error", calls, err)
	}
}
