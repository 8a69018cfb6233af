package leasebook

import (
	"context"
	"time"
)

// CleanupGrace is how long past its caller's deadline an acquire waits
// for the cleanup of a failed wait (giving back a grant whose reply may
// have been lost, leaving a queue). Against a healthy service that
// cleanup takes a round trip; against one that is away it may take a
// whole fresh call bound, which the caller must not wait for.
const CleanupGrace = 250 * time.Millisecond

// CleanupWithin runs cleanup, which bounds itself (on a fresh context),
// and waits for it until it returns, or until CleanupGrace after ctx
// ended (its deadline passed or it was cancelled); past that it goes on in
// the background. An acquire's answer is thus never held up by a lock
// service that does not answer its cleanup, and a cleanup that only
// compares-and-deletes its own token can finish later without harm.
func CleanupWithin(ctx context.Context, cleanup func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cleanup()
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(CleanupGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Pauses of RetryUntilDone: the first, and the most it doubles to.
const (
	RetryFirst = 50 * time.Millisecond
	RetryMax   = 2 * time.Second
)

// RetryUntilDone calls try after RetryFirst, then again after pauses
// doubling up to RetryMax, until try reports done or ctx ends: for
// cleanup the lock service must get in the end, such as a release it did
// not answer, whose locks would otherwise stay held until their lease
// (or, in etcd and ZooKeeper, their session) ends. try bounds its own
// call.
func RetryUntilDone(ctx context.Context, try func() (done bool)) {
	t := time.NewTimer(RetryFirst)
	defer t.Stop()
	for pause := RetryFirst; ; pause = min(2*pause, RetryMax) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if try() {
			return
		}
		t.Reset(min(2*pause, RetryMax))
	}
}
