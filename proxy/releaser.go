package proxy

import (
	"sync"
	"time"
)

// releaserIdle is how long a releaser goroutine waits for its next
// release before it ends.
const releaserIdle = 2 * time.Second

// releasers runs the releases sessions give back in the background
// (releaseBehind) on goroutines that stay for releaserIdle after their
// last one. A fresh goroutine per release grew its stack through the
// lock service's client on every statement, about a twentieth of a
// guarded statement's CPU. Safe for concurrent use.
type releasers struct {
	jobs     chan func() // unbuffered: a send succeeds only to an idle releaser
	done     chan struct{}
	stopOnce sync.Once
	idle     time.Duration
}

func newReleasers() *releasers {
	return &releasers{jobs: make(chan func()), done: make(chan struct{}), idle: releaserIdle}
}

// run runs job on an idle releaser, or on a new one when none is idle. It
// never waits.
func (r *releasers) run(job func()) {
	select {
	case r.jobs <- job:
	default:
		go r.work(job)
	}
}

// work runs job, then the jobs it is given, until it has been idle for
// r.idle or the releasers are stopped.
func (r *releasers) work(job func()) {
	t := time.NewTimer(r.idle)
	defer t.Stop()
	for {
		job()
		t.Reset(r.idle)
		select {
		case job = <-r.jobs:
		case <-t.C:
			return
		case <-r.done:
			return
		}
	}
}

// stop ends the idle releasers (and each busy one after its job); run
// still runs what it is given afterwards.
func (r *releasers) stop() { r.stopOnce.Do(func() { close(r.done) }) }
