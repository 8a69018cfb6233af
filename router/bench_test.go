package router

import (
	"testing"
	"time"
)

// BenchmarkPickAndTrack measures the per-read cost of choosing a replica
// and releasing it, from many goroutines at once, over three healthy
// replicas.
func BenchmarkPickAndTrack(b *testing.B) {
	r := New(Config{Primary: "p:1", Replicas: []string{"a:1", "b:1", "c:1"}}, nil, nil)
	for _, addr := range []string{"a:1", "b:1", "c:1"} {
		r.find(addr).apply(checkResult{up: true, lagKnown: true, gtid: "0-1-10"}, time.Now(), time.Now(), r.metrics)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, release, ok := r.PickAndTrack()
			if !ok {
				b.Fatal("no replica")
			}
			release()
		}
	})
}
