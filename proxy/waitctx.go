package proxy

import (
	"context"
	"sync"
	"time"
)

// waitCtx is the context of a statement's lock wait: parent's, with a
// deadline. context.WithDeadline sets a timer when it is made, and most
// guarded statements never wait (their keys are free, or already the
// session's, or their instance's to take over), yet the timer was set
// and stopped at every statement, and setting a timer sooner than any
// other wakes one of the runtime's threads to watch it. A waitCtx makes
// the real context, and its timer, only when something asks for Done,
// which is what a wait does; until then Deadline and Err answer from the
// deadline and the parent.
type waitCtx struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	inner  context.Context // nil until Done is asked for
	cancel context.CancelFunc
	// stopped is what Err says once stop was called before the real
	// context was made: Canceled, or DeadlineExceeded when the deadline
	// had passed by then; nil before stop.
	stopped error
}

// newWaitCtx returns parent with a deadline timeout from now, and the
// function that releases it (as context.WithTimeout's cancel does).
func newWaitCtx(parent context.Context, timeout time.Duration) (*waitCtx, context.CancelFunc) {
	c := &waitCtx{parent: parent, deadline: time.Now().Add(timeout)}
	return c, c.stop
}

// real returns the context the answers come from once made: nil before
// Done was asked for.
func (c *waitCtx) real() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inner
}

// make makes the real context, with its timer, if it is not made yet.
func (c *waitCtx) make() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.inner != nil:
	case c.stopped == context.Canceled:
		c.inner, c.cancel = context.WithCancel(c.parent)
		c.cancel()
	default: // running, or stopped past the deadline (no timer then)
		c.inner, c.cancel = context.WithDeadline(c.parent, c.deadline)
	}
	return c.inner
}

// stop releases the context, as a context.WithDeadline's cancel does.
func (c *waitCtx) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		return
	}
	if c.stopped == nil {
		c.stopped = context.Canceled
		if !time.Now().Before(c.deadline) {
			c.stopped = context.DeadlineExceeded
		}
	}
}

// Deadline implements context.Context: the earlier of the wait's and
// the parent's.
func (c *waitCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done implements context.Context; it makes the real context.
func (c *waitCtx) Done() <-chan struct{} { return c.make().Done() }

// Err implements context.Context: before the real context is made, what
// it would say: the parent's error, else what stop left, else
// DeadlineExceeded once the deadline has passed.
func (c *waitCtx) Err() error {
	c.mu.Lock()
	in, stopped := c.inner, c.stopped
	c.mu.Unlock()
	switch {
	case in != nil:
		return in.Err()
	case c.parent.Err() != nil:
		return c.parent.Err()
	case stopped != nil:
		return stopped
	case !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context. Before the real context is made a
// key is the parent's: a context derived from this one asks for Done
// first (to learn whether it can be canceled), which makes it.
func (c *waitCtx) Value(key any) any {
	if in := c.real(); in != nil {
		return in.Value(key)
	}
	return c.parent.Value(key)
}
