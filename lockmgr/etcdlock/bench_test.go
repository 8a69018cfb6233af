package etcdlock_test

import (
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// BenchmarkUncontended: acquire+release of a free key (two round trips:
// one transaction to queue and read, one to delete).
func BenchmarkUncontended(b *testing.B) {
	s := getServer(b)
	l := etcdlock.New(s.newClient(b), &etcdlock.Options{TTL: 10 * time.Second, Prefix: prefix()})
	defer l.Close()
	locktest.WarmUp(b, l)
	locktest.BenchUncontended(b, l)
}

// BenchmarkHotKeyHandoff: 8 goroutines over 2 Lockers take turns on one
// key; ns/op is per grant.
func BenchmarkHotKeyHandoff(b *testing.B) {
	s := getServer(b)
	pfx := prefix()
	var ls []lockmgr.Locker
	for range 2 {
		l := etcdlock.New(s.newClient(b), &etcdlock.Options{TTL: 10 * time.Second, Prefix: pfx})
		defer l.Close()
		locktest.WarmUp(b, l)
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}
