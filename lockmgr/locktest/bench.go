package locktest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// BenchUncontended measures one acquire plus release of a key nobody else
// wants, on one Locker.
func BenchUncontended(b *testing.B, l lockmgr.Locker) {
	ctx := context.Background()
	o := lockmgr.Owner{Instance: "bench", Session: 1, Start: time.Now()}
	key := []lockmgr.Key{{Name: fmt.Sprintf("bench-unc-%d", time.Now().UnixNano()), Rule: "bench"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		o.Txn = uint64(i)
		lease, err := l.Acquire(ctx, o, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchHotKey measures hand-off of one hot key between goroutines spread
// over the given Lockers (as proxy instances): ns/op is per grant.
func BenchHotKey(b *testing.B, ls []lockmgr.Locker, goroutines int) {
	key := []lockmgr.Key{{Name: fmt.Sprintf("bench-hot-%d", time.Now().UnixNano()), Rule: "bench"}}
	var left, sessions atomic.Int64
	left.Store(int64(b.N))
	done := make(chan error, goroutines)
	b.ResetTimer()
	for g := range goroutines {
		go func() {
			l := ls[g%len(ls)]
			for left.Add(-1) >= 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				o := lockmgr.Owner{Instance: "bench", Session: uint64(sessions.Add(1)), Start: time.Now()}
				lease, err := l.Acquire(ctx, o, key)
				if err == nil {
					err = lease.Release(ctx)
				}
				cancel()
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range goroutines {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
