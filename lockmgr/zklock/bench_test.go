package zklock_test

import (
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// BenchmarkUncontended: acquire+release of a free key (create; children
// and stat in parallel; delete).
func BenchmarkUncontended(b *testing.B) {
	s := getServer(b)
	l := newLocker(b, s.addr, root(), 10*time.Second)
	defer l.Close()
	locktest.WarmUp(b, l)
	locktest.BenchUncontended(b, l)
}

// BenchmarkHotKeyHandoff: 8 goroutines over 2 Lockers take turns on one
// key; ns/op is per grant.
func BenchmarkHotKeyHandoff(b *testing.B) {
	s := getServer(b)
	r := root()
	var ls []lockmgr.Locker
	for range 2 {
		l := newLocker(b, s.addr, r, 10*time.Second)
		defer l.Close()
		locktest.WarmUp(b, l)
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}
