package redislock

import (
	"context"
	"errors"
	"fmt"
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
	} {
		if got := classify(c.ctx, k, c.err); !errors.Is(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
