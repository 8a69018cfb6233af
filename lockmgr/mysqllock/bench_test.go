package mysqllock_test

import (
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/mysqllock"
)

// BenchmarkUncontended: acquire+release of a free key (two statements
// once the row exists).
func BenchmarkUncontended(b *testing.B) {
	bed := testbed.Get(b)
	l := open(b, bed, tempDB(b, bed), &mysqllock.Options{TTL: 10 * time.Second})
	defer l.Close()
	locktest.BenchUncontended(b, l)
}

// BenchmarkHotKeyHandoff: 8 goroutines over 2 Lockers take turns on one
// key; ns/op is per grant.
func BenchmarkHotKeyHandoff(b *testing.B) {
	bed := testbed.Get(b)
	dbName := tempDB(b, bed)
	var ls []lockmgr.Locker
	for range 2 {
		l := open(b, bed, dbName, &mysqllock.Options{TTL: 10 * time.Second})
		defer l.Close()
		ls = append(ls, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}
