package redlock_test

import (
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// BenchmarkUncontended: acquire+release of a free key on three servers
// (one parallel round trip to each for acquire, one for release).
func BenchmarkUncontended(b *testing.B) {
	l := dial(b, sharedAddrs(b), prefix(), 10*time.Second)
	defer l.Close()
	locktest.BenchUncontended(b, l)
}

// BenchmarkHotKeyHandoff: 8 goroutines over 2 Lockers take turns on one
// key; ns/op is per grant.
func BenchmarkHotKeyHandoff(b *testing.B) {
	as, pfx := sharedAddrs(b), prefix()
	var ls []lockmgr.Locker
	for range 2 {
		l := dial(b, as, pfx, 10*time.Second)
		defer l.Close()
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}
