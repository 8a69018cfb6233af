package zklock_test

import (
	"context"
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
	warmUp(b, l)
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
		warmUp(b, l)
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}

// warmUp creates the Locker's znodes and takes one key, so they are not
// measured.
func warmUp(b *testing.B, l lockmgr.Locker) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "warm", Start: time.Now()}, []lockmgr.Key{{Name: "warm-up", Rule: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	_ = lease.Release(ctx)
}
