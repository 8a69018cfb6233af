package memlock_test

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
)

func TestConformance(t *testing.T) {
	locktest.Run(t, locktest.Backend{
		Lockers: func(t *testing.T, n int) []lockmgr.Locker {
			first := memlock.New(zaptest.NewLogger(t), nil)
			out := []lockmgr.Locker{first}
			for len(out) < n {
				out = append(out, first.Share())
			}
			return out
		},
	})
}

func BenchmarkUncontended(b *testing.B) {
	locktest.BenchUncontended(b, memlock.New(nil, nil))
}

func BenchmarkHotKeyHandoff(b *testing.B) {
	l := memlock.New(nil, nil)
	locktest.BenchHotKey(b, []lockmgr.Locker{l, l.Share()}, 8)
}
