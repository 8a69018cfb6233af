package testbed

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestEventually: a condition that comes true in time passes, and one
// that never does fails the test with its reason.
func TestEventually(t *testing.T) {
	start := time.Now()
	Eventually(t, 5*time.Second, "a short wait", func() bool { return time.Since(start) > 20*time.Millisecond })

	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyWhy(ft, 30*time.Millisecond, "never", func() (bool, string) { return false, "still false" })
	}()
	<-done
	if want := "never: not within 30ms: still false"; ft.msg != want {
		t.Errorf("failure %q, want %q", ft.msg, want)
	}
}

// fakeT records a Fatalf and ends the goroutine as testing.T does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
