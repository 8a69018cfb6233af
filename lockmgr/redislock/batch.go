package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// batcher sends the calls that sessions of one Locker make at the same
// moment to Redis as one pipeline: one write and one read for all of them
// instead of a round trip each. A Locker has two: one for releases
// (Locker.batch) and one for the fast path's acquires (Locker.acquires),
// so that an acquire never waits behind a batch of releases. It adds no
// wait: a call made while no batch is on its way is sent at once; calls
// made while one is on its way go together in the next, which is sent as
// soon as that one is answered (group commit), by the caller of one of
// them (handOn): its goroutine has to wake for its reply anyway, where a
// goroutine started for the batch would grow a new stack through
// go-redis's pipeline every time. A caller sends a batch only when none
// of its calls may be waited for longer than the caller itself would
// wait (lead): a statement's lock wait never outlasts its own deadline
// for another call's sake.
//
// With Options.ReleaseWindow, the release of a lease nobody else wanted
// is held instead (hold): it rides in the pipeline of this Locker's next
// acquire (take: the next batch of acquires, through carry, or another
// call that takes it), or goes on its own when the window has passed
// since the first release still held was held (expire), whichever comes
// first. Its caller does not wait for it. A later acquire of the Locker
// does not wait for a held release that went on its own either: a
// release deletes only its own token, so it is harmless whenever it
// lands, and an acquire of one of its keys that gets to Redis first finds
// the key taken and waits as for any holder, until the release grants it
// the key or wakes it. Observe waits for it (takeSent): it would
// otherwise see the Locker's own released key in the way.
type batcher struct {
	l       *Locker
	mu      sync.Mutex
	pending []*batchCall
	busy    bool // a batch is on its way, or about to be

	// carry, on the batcher of acquires, is the batcher whose held
	// releases each batch takes along, ahead of its own calls.
	carry *batcher

	held  []*batchCall
	nheld atomic.Int32 // len(held) + unheld calls not yet answered: read without mu
	// timer sends the held calls once the first of them is due
	// (expire); timerAt is when it fires, zero when it is not set.
	// Taking calls back (reclaim, take) leaves it set: it then fires
	// for nothing, or for a call held since, and is set again for the
	// first one still held. A session that comes back for its own row
	// within the window takes back one release and holds the next at
	// every statement; the timer then moves once a window, not twice a
	// statement (stopped, then set again).
	timer   *time.Timer
	timerAt time.Time
	// sendMu orders the sends of unhold; sent is closed when the last
	// calls unhold took are answered: takeSent waits for it.
	sendMu sync.Mutex
	sent   chan struct{}
}

// batchCall is one caller's part of a batch.
type batchCall struct {
	// deadline bounds the call as leasebook.CallCtx would have bounded
	// it alone: its ctx's deadline, else OpTimeout from now.
	deadline time.Time
	queue    func(p redis.Pipeliner) []*redis.Cmd
	cmds     []*redis.Cmd
	// done, for a call of do, tells its caller true when it is to send
	// the batch the call is in (handOn), false when the call is
	// answered; the caller reads the one before the other can be sent,
	// so the buffer of one means whoever sends never waits.
	done chan bool
	// turn: handOn gave this call's caller the batch to send and the
	// caller has not taken it yet (lead); gone: the caller stopped
	// waiting (ctx). Both under batcher.mu.
	turn, gone bool
	// after, for a held call, is run with its outcome instead of
	// answering done (nobody waits for it).
	after func(cmds []*redis.Cmd, err error)
	// lease, for a held release, is the lease it releases (reclaim).
	lease *leasebook.Held
	// due, for a held call, is when its window ends.
	due time.Time
}

// finish ends c with the outcome of its commands.
func (c *batchCall) finish() {
	if c.after == nil {
		c.done <- false
		return
	}
	c.after(c.cmds, cmdsErr(c.cmds))
}

// cmdsErr is the first error among cmds other than redis.Nil.
func cmdsErr(cmds []*redis.Cmd) error {
	for _, cmd := range cmds {
		if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
			return e
		}
	}
	return nil
}

// do queues the calls queue makes into the next batch and waits for their
// replies (each Cmd carries its own), or for the end of ctx. A call whose
// wait ended with ctx may still run later, in a batch that another call's
// later deadline sends: a release is a compare-and-delete of its own
// token, harmless whenever it runs; an acquire is undone by its failed
// wait's cleanup, which goes through the same batcher (attempt.fail).
// Batches run one after another, so a call runs after every call queued
// before it.
func (b *batcher) do(ctx context.Context, queue func(p redis.Pipeliner) []*redis.Cmd) ([]*redis.Cmd, error) {
	c := &batchCall{queue: queue, done: make(chan bool, 1)}
	var ok bool
	if c.deadline, ok = ctx.Deadline(); !ok {
		c.deadline = time.Now().Add(b.l.opt.OpTimeout)
	}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	// The first caller sends its batch itself (no goroutine switch when
	// there is nothing to share); the batch that gathered meanwhile goes
	// with the caller of one of its calls (handOn).
	if lead && b.lead(c) {
		return c.cmds, cmdsErr(c.cmds)
	}
	for {
		select {
		case turn := <-c.done:
			if !turn || b.lead(c) {
				return c.cmds, cmdsErr(c.cmds)
			}
		case <-ctx.Done():
			b.mu.Lock()
			if c.turn {
				// Given the batch to send as its wait ended: the batch
				// goes all the same, on a goroutine of its own.
				<-c.done
				c.turn = false
				b.mu.Unlock()
				go b.flush()
				return nil, ctx.Err()
			}
			c.gone = true
			b.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// lead sends the pending batch, c among it, on c's caller's goroutine, and
// reports true when it has; when a call in it may be waited for longer
// than c's caller waits (a batch is waited for until the latest deadline
// of its calls), the batch goes on a goroutine of its own instead, and c's
// caller waits for its reply as any other (false).
func (b *batcher) lead(c *batchCall) bool {
	b.mu.Lock()
	c.turn = false
	calls := b.pending
	if latest(calls).After(c.deadline) {
		b.mu.Unlock()
		go b.flush()
		return false
	}
	b.pending = nil
	b.mu.Unlock()
	b.sendBatch(calls)
	return true
}

// flush sends what is pending as one pipeline (sendBatch).
func (b *batcher) flush() {
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	b.mu.Unlock()
	b.sendBatch(calls)
}

// sendBatch sends calls as one pipeline, then, if more gathered
// meanwhile, hands that batch on (handOn), else leaves busy.
func (b *batcher) sendBatch(calls []*batchCall) {
	// The batch is waited for as long as its most patient call would
	// have waited alone: a slow server is not taken for a dead one.
	ctx, cancel := context.WithDeadline(context.Background(), latest(calls))
	var held []*batchCall
	if b.carry != nil {
		held = b.carry.take() // released before these calls were made
	}
	b.pipeline(ctx, held, calls)
	cancel()
	if b.carry != nil {
		b.carry.landed(held)
	}
	for _, c := range calls {
		c.finish()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.busy = false
		return
	}
	b.handOn()
}

// handOn, with b.mu held and calls pending, wakes the caller still
// waiting with the latest deadline among them to send them all (do,
// lead); when none waits, a goroutine of its own does.
func (b *batcher) handOn() {
	var next *batchCall
	for _, c := range b.pending {
		if !c.gone && (next == nil || c.deadline.After(next.deadline)) {
			next = c
		}
	}
	if next == nil {
		go b.flush()
		return
	}
	next.turn = true
	next.done <- true
}

// hold keeps c, a release, for the next acquire of the Locker to carry
// (take), or sends it, with every call held then, when the window has
// passed since the first call still held was held (expire). c.after gets
// its outcome.
func (b *batcher) hold(c *batchCall, window time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.due = time.Now().Add(window)
	b.held = append(b.held, c)
	b.nheld.Add(1)
	if b.timerAt.IsZero() || c.due.Before(b.timerAt) {
		b.setTimerLocked(c.due)
	}
}

// setTimerLocked sets the timer to fire at at, with b.mu held.
func (b *batcher) setTimerLocked(at time.Time) {
	b.timerAt = at
	if b.timer == nil {
		b.timer = time.AfterFunc(time.Until(at), b.expire)
		return
	}
	b.timer.Reset(time.Until(at))
}

// expire sends what is held once the first call still held is due, and
// otherwise sets the timer for when it is.
func (b *batcher) expire() {
	b.mu.Lock()
	b.timerAt = time.Time{}
	if len(b.held) == 0 {
		b.mu.Unlock()
		return
	}
	first := b.held[0].due
	for _, c := range b.held[1:] {
		if c.due.Before(first) {
			first = c.due
		}
	}
	if time.Now().Before(first) {
		b.setTimerLocked(first)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.unhold()
}

// reclaim takes back the held release of lease h before anything sends
// it, and returns it (nil when it is not held: sent, on its way, or
// never held). The caller either drops it (Locker.reclaim: nothing of it
// reached Redis) or holds it again.
func (b *batcher) reclaim(h *leasebook.Held) *batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, c := range b.held {
		if c.lease == h {
			b.held = append(b.held[:i], b.held[i+1:]...)
			b.nheld.Add(-1)
			return c
		}
	}
	return nil
}

// take returns the held calls for the caller to send ahead of its own in
// one pipeline (ride, or its own pipeline and then landed).
func (b *batcher) take() []*batchCall {
	calls, _ := b.takeAll()
	return calls
}

// takeSent is take, once the calls unhold sent on their own are answered
// too (or ctx ends): every held release made before the caller's call
// reaches Redis before it.
func (b *batcher) takeSent(ctx context.Context) []*batchCall {
	calls, sent := b.takeAll()
	if sent != nil {
		select {
		case <-sent:
		case <-ctx.Done():
		}
	}
	return calls
}

// takeAll empties held and returns what it held and the channel of the
// last calls unhold sent (nil if they are answered).
func (b *batcher) takeAll() ([]*batchCall, chan struct{}) {
	if b.nheld.Load() == 0 {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	calls := b.held
	b.held = nil
	return calls, b.sent
}

// ride sends the held calls and then own's in one pipeline, bounded by
// ctx (the caller's), and finishes the held calls. A held call that
// failed (its script not loaded, ctx ended for the caller's sake) is
// sent again on its own, with its own deadline: a release is a
// compare-and-delete of its own token, harmless whenever it runs.
func (b *batcher) ride(ctx context.Context, calls []*batchCall, own func(p redis.Pipeliner) []*redis.Cmd) []*redis.Cmd {
	var mine []*redis.Cmd
	_, _ = b.l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range calls {
			c.cmds = c.queue(p)
		}
		mine = own(p)
		return nil
	})
	b.landed(calls)
	return mine
}

// landed finishes held calls sent ahead of an acquire's own (take).
func (b *batcher) landed(calls []*batchCall) {
	var again []*batchCall
	for _, c := range calls {
		if cmdsErr(c.cmds) != nil {
			again = append(again, c)
			continue
		}
		b.nheld.Add(-1)
		c.finish()
	}
	if len(again) > 0 {
		b.mu.Lock()
		done := b.sending(again)
		b.mu.Unlock()
		go b.send(again, done)
	}
}

// unhold sends what is held now, on its own (the window has passed, or a
// caller needs the keys freed at once).
func (b *batcher) unhold() {
	b.mu.Lock()
	calls := b.held
	b.held = nil
	done := b.sending(calls)
	b.mu.Unlock()
	if len(calls) > 0 {
		b.send(calls, done)
	}
}

// sending marks calls as on their way, with b.mu held: take waits for
// the returned channel, which send closes.
func (b *batcher) sending(calls []*batchCall) chan struct{} {
	if len(calls) == 0 {
		return nil
	}
	b.sent = make(chan struct{})
	return b.sent
}

// send sends held calls in one pipeline (reloading the scripts if the
// server lost them), bounded by the latest of their deadlines, after
// every send before it is answered, and closes done.
func (b *batcher) send(calls []*batchCall, done chan struct{}) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), latest(calls))
	b.pipeline(ctx, nil, calls)
	cancel()
	for _, c := range calls {
		b.nheld.Add(-1)
		c.finish()
	}
	b.mu.Lock()
	if b.sent == done {
		b.sent = nil
	}
	b.mu.Unlock()
	close(done)
}

// drop ends what is held without sending it (the Locker was abandoned).
func (b *batcher) drop(err error) {
	b.mu.Lock()
	calls := b.held
	b.held = nil
	b.mu.Unlock()
	for _, c := range calls {
		b.nheld.Add(-1)
		c.after(nil, err)
	}
}

// pipeline sends the calls of ahead and then those of calls in one
// pipeline (reloading the scripts if the server lost them); each call
// reads its own replies.
func (b *batcher) pipeline(ctx context.Context, ahead, calls []*batchCall) {
	_, _ = b.l.sc.pipelined(ctx, b.l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		var all []*redis.Cmd
		for _, list := range [2][]*batchCall{ahead, calls} {
			for _, c := range list {
				c.cmds = c.queue(p)
				all = append(all, c.cmds...)
			}
		}
		return all
	})
}

// latest is the latest deadline of calls.
func latest(calls []*batchCall) time.Time {
	var until time.Time
	for _, c := range calls {
		if c.deadline.After(until) {
			until = c.deadline
		}
	}
	return until
}
