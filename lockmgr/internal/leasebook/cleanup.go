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
