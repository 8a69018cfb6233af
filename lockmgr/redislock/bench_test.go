package redislock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
)

// BenchmarkUncontended: acquire+release of a free key; also reports Redis
// round trips per operation.
func BenchmarkUncontended(b *testing.B) {
	bed := testbed.Get(b)
	rdb := newClient(b, bed.RedisAddr)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	l := redislock.New(rdb, &redislock.Options{TTL: 10 * time.Second, Prefix: prefix(b)})
	defer l.Close()
	locktest.WarmUp(b, l)
	start := rt.n.Load()
	locktest.BenchUncontended(b, l)
	b.StopTimer()
	b.ReportMetric(float64(rt.n.Load()-start)/float64(b.N), "roundtrips/op")
}

// BenchmarkHotKeyHandoff: 8 goroutines over 2 Lockers (two proxy
// instances) take turns on one key; ns/op is per grant.
func BenchmarkHotKeyHandoff(b *testing.B) {
	bed := testbed.Get(b)
	pfx := prefix(b)
	var ls []lockmgr.Locker
	for range 2 {
		l := redislock.New(newClient(b, bed.RedisAddr), &redislock.Options{TTL: 10 * time.Second, Prefix: pfx})
		defer l.Close()
		ls = append(ls, l)
	}
	for _, l := range ls {
		locktest.WarmUp(b, l)
	}
	locktest.BenchHotKey(b, ls, 8)
}

// BenchmarkHotKeyOneLocker: 8 goroutines of one Locker take turns on one
// key; each hand-off is the release round trip, which grants the key
// to the next waiter inside Redis and tells it in the reply.
func BenchmarkHotKeyOneLocker(b *testing.B) {
	bed := testbed.Get(b)
	l := redislock.New(newClient(b, bed.RedisAddr), &redislock.Options{TTL: 10 * time.Second, Prefix: prefix(b)})
	defer l.Close()
	locktest.WarmUp(b, l)
	locktest.BenchHotKey(b, []lockmgr.Locker{l}, 8)
}

// BenchmarkUncontendedReplicasAck: acquire+release of a free key on a
// Sentinel group (a master, two replicas) without and with
// MinReplicasAck: what waiting for the replicas adds to each grant.
func BenchmarkUncontendedReplicasAck(b *testing.B) {
	g := testbed.StartSentinel(b)
	for _, acks := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("acks=%d", acks), func(b *testing.B) {
			rdb := redis.NewUniversalClient(redislock.ClientOptions(g.Addrs, g.MasterName, false))
			defer rdb.Close()
			rt := &roundTrips{}
			rdb.AddHook(rt)
			l := redislock.New(rdb, &redislock.Options{TTL: 10 * time.Second, Prefix: prefix(b), MinReplicasAck: acks})
			defer l.Close()
			locktest.WarmUp(b, l)
			start := rt.n.Load()
			locktest.BenchUncontended(b, l)
			b.StopTimer()
			b.ReportMetric(float64(rt.n.Load()-start)/float64(b.N), "roundtrips/op")
		})
	}
}
