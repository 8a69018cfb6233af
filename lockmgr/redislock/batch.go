package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the releases that sessions of one Locker make at the
// same moment to Redis as one pipeline: one write and one read for all of
// them instead of a round trip each. It adds no wait: a call made while no batch is on its way is sent at once;
// calls made while one is on its way go together in the next, which is
// sent as soon as that one is answered (group commit).
type batcher struct {
	l       *Locker
	mu      sync.Mutex
	pending []*batchCall
	busy    bool // a batch is on its way, or about to be
}

// batchCall is one caller's part of a batch.
type batchCall struct {
	// deadline bounds the call as leasebook.CallCtx would have bounded
	// it alone: its ctx's deadline, else OpTimeout from now.
	deadline time.Time
	queue    func(p redis.Pipeliner) []*redis.Cmd
	cmds     []*redis.Cmd
	done     chan struct{}
}

// do queues the calls queue makes into the next batch and waits for their
// replies (each Cmd carries its own), or for the end of ctx. A call whose
// wait ended with ctx may still run later: a release is a
// compare-and-delete of its own token, harmless whenever it runs.
// Batches run one after another, so a call runs after every call queued
// before it.
func (b *batcher) do(ctx context.Context, queue func(p redis.Pipeliner) []*redis.Cmd) ([]*redis.Cmd, error) {
	c := &batchCall{queue: queue, done: make(chan struct{})}
	var ok bool
	if c.deadline, ok = ctx.Deadline(); !ok {
		c.deadline = time.Now().Add(b.l.opt.OpTimeout)
	}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if lead {
		// The first caller sends its batch itself (no goroutine switch
		// when there is nothing to share); the batches that gathered
		// meanwhile go on in the background.
		if b.flush() {
			go b.drain()
		}
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var err error
	for _, cmd := range c.cmds {
		if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
			err = e
			break
		}
	}
	return c.cmds, err
}

// drain sends batches until none is pending.
func (b *batcher) drain() {
	for b.flush() {
	}
}

// flush sends what is pending as one pipeline; it reports whether more
// gathered meanwhile (the caller then sends it), else leaves busy.
func (b *batcher) flush() bool {
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	b.mu.Unlock()
	l := b.l
	// The batch is waited for as long as its most patient call would
	// have waited alone: a slow server is not taken for a dead one.
	var until time.Time
	for _, c := range calls {
		if c.deadline.After(until) {
			until = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	_, _ = l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		var all []*redis.Cmd
		for _, c := range calls {
			c.cmds = c.queue(p)
			all = append(all, c.cmds...)
		}
		return all
	})
	cancel()
	for _, c := range calls {
		close(c.done)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.busy = false
		return false
	}
	return true
}
