package redislock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// BenchmarkUncontendedInList: acquire+release of 10 free keys in one
// lease (a statement's IN list), with rules that do not fence writes (the
// fast path's strings), that do (the acquire script's hashes), and half
// of each; also reports the script calls and the Redis server's CPU per
// operation (INFO cpu).
func BenchmarkUncontendedInList(b *testing.B) {
	for _, mix := range []string{"fast", "fenced", "mixed"} {
		b.Run(mix, func(b *testing.B) {
			calls := &scriptCalls{}
			l, rdb := hookedLocker(b, prefix(b), 10*time.Second, calls)
			locktest.WarmUp(b, l)
			ctx := context.Background()
			var keys []lockmgr.Key
			for i := range 10 {
				fenced := mix == "fenced" || mix == "mixed" && i%2 == 0
				keys = append(keys, lockmgr.Key{Name: fmt.Sprintf("in%d", i), Rule: "r", NoHandoff: fenced})
			}
			owner := locktest.Owner("bench")
			cpu0 := redisCPU(b, rdb)
			calls.on.Store(true)
			b.ResetTimer()
			for range b.N {
				lease, err := l.Acquire(ctx, owner, keys)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			calls.on.Store(false)
			b.ReportMetric(float64(calls.n.Load())/float64(b.N), "scripts/op")
			b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis-µs/op")
		})
	}
}

// redisCPU is the Redis server's CPU time so far, in seconds.
func redisCPU(b *testing.B, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f
		}
	}
	return total
}
