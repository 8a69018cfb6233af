package proxy

import (
	"context"
	"errors"
	"testing"
	"time"
)

// closedWithin reports whether done closes within d.
func closedWithin(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	default:
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestWaitCtx: a statement's wait context answers as
// context.WithTimeout's would, whether or not anything waited on it
// (asked for Done, which makes its timer), and whatever ends it first:
// its deadline, its parent, or its release.
func TestWaitCtx(t *testing.T) {
	type key struct{}
	base := context.WithValue(context.Background(), key{}, "v")

	t.Run("not waited on", func(t *testing.T) {
		before := time.Now()
		c, stop := newWaitCtx(base, time.Minute)
		if d, ok := c.Deadline(); !ok || d.Before(before.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
			t.Errorf("Deadline = %v, %v; want a minute from now", d, ok)
		}
		if err := c.Err(); err != nil {
			t.Errorf("Err before the deadline = %v; want nil", err)
		}
		if v := c.Value(key{}); v != "v" {
			t.Errorf("Value = %v; want the parent's", v)
		}
		if c.real() != nil {
			t.Error("the timer context was made although nothing waited")
		}
		stop()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err after release = %v; want Canceled", err)
		}
		if !closedWithin(c.Done(), 0) {
			t.Error("Done asked for after release is not closed")
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err once Done was asked for after release = %v; want Canceled", err)
		}
	})

	t.Run("waited on, the deadline ends it", func(t *testing.T) {
		c, stop := newWaitCtx(base, 30*time.Millisecond)
		defer stop()
		done := c.Done()
		if err := c.Err(); err != nil {
			t.Errorf("Err right after Done = %v; want nil", err)
		}
		if !closedWithin(done, 5*time.Second) {
			t.Fatal("Done did not close at the deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err = %v; want DeadlineExceeded", err)
		}
	})

	t.Run("the deadline passes before anything asks", func(t *testing.T) {
		c, stop := newWaitCtx(base, time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err past the deadline = %v; want DeadlineExceeded", err)
		}
		stop()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err of a context released past its deadline = %v; want DeadlineExceeded", err)
		}
		if !closedWithin(c.Done(), 0) {
			t.Error("Done past the deadline is not closed")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err once Done was asked for = %v; want DeadlineExceeded", err)
		}
	})

	t.Run("the parent ends it", func(t *testing.T) {
		for _, waited := range []bool{false, true} {
			parent, cancel := context.WithCancel(base)
			c, stop := newWaitCtx(parent, time.Minute)
			var done <-chan struct{}
			if waited {
				done = c.Done()
			}
			cancel()
			if err := c.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("waited %v: Err after the parent's end = %v; want Canceled", waited, err)
			}
			if done == nil {
				done = c.Done()
			}
			if !closedWithin(done, 5*time.Second) {
				t.Errorf("waited %v: Done did not close with the parent", waited)
			}
			stop()
		}
	})

	t.Run("the parent's earlier deadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(base, time.Second)
		defer cancel()
		pd, _ := parent.Deadline()
		c, stop := newWaitCtx(parent, time.Minute)
		defer stop()
		if d, _ := c.Deadline(); !d.Equal(pd) {
			t.Errorf("Deadline = %v; want the parent's %v", d, pd)
		}
	})

	t.Run("a context made from it", func(t *testing.T) {
		// A child asks for Done (to learn whether it can be canceled),
		// which makes the timer; the child then ends with it.
		c, stop := newWaitCtx(base, 30*time.Millisecond)
		defer stop()
		child, cancel := context.WithCancel(c)
		defer cancel()
		if c.real() == nil {
			t.Fatal("a child was made without the timer context")
		}
		if !closedWithin(child.Done(), 5*time.Second) {
			t.Fatal("the child did not end at the deadline")
		}
		if err := child.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("child's Err = %v; want DeadlineExceeded", err)
		}

		parent, pcancel := context.WithCancel(base)
		c2, stop2 := newWaitCtx(parent, time.Minute)
		defer stop2()
		child2 := context.WithoutCancel(context.WithValue(c2, key{}, "w"))
		if child2.Value(key{}) != "w" {
			t.Error("a value context made from it lost its value")
		}
		after, acancel := context.WithCancel(context.WithValue(c2, key{}, "w"))
		defer acancel()
		pcancel()
		if !closedWithin(after.Done(), 5*time.Second) {
			t.Error("a context made from it did not end with its parent")
		}
	})
}
