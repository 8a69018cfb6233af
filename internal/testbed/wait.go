package testbed

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails t, naming what, when it
// has not held within. It is how a test waits for something another
// goroutine or process does: a generous deadline on a condition, never a
// sleep that assumes an idle host. It polls every few milliseconds at
// first and every 50 ms once the wait is long.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyWhy(t, within, what, func() (bool, string) { return cond(), "" })
}

// EventuallyWhy is Eventually for a condition that says why it does not
// hold yet; the last reason is in the failure.
func EventuallyWhy(t testing.TB, within time.Duration, what string, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := 2 * time.Millisecond
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if why != "" {
				t.Fatalf("%s: not within %v: %s", what, within, why)
			}
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
