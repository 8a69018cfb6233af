package proxy

import (
	"sync"
	"testing"
	"time"
)

// TestReleasers: every job runs, at once even when all releasers are busy
// (a release never waits for another), and once stopped the releasers
// end while later jobs still run.
func TestReleasers(t *testing.T) {
	r := newReleasers()
	block := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	r.run(func() { defer wg.Done(); <-block }) // busy until unblocked
	ran := make(chan int, 10)
	for i := range 5 {
		r.run(func() { ran <- i })
	}
	seen := map[int]bool{}
	for range 5 {
		select {
		case i := <-ran:
			seen[i] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("a job waited for a busy releaser; ran %v", seen)
		}
	}
	close(block)
	wg.Wait()
	r.stop()
	done := make(chan struct{})
	r.run(func() { close(done) })
	<-done
}
