package etcdlock_test

import (
	"context"
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
	warmUp(b, l)
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
		warmUp(b, l)
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}

// warmUp grants the session and takes one key, so they are not measured.
func warmUp(b *testing.B, l lockmgr.Locker) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := l.Acquire(ctx, lockmgr.Owner{Instance: "warm", Start: time.Now()}, []lockmgr.Key{{Name: "warm-up", Rule: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	_ = lease.Release(ctx)
}
