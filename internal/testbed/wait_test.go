package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
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

// TestAwaitAdmin: a server that answers 200 is served, one that never does
// times out naming its answer, and a gone process ends the wait at once.
func TestAwaitAdmin(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() || r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := AwaitAdmin(ctx, admin, "/readyz", nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("not ready: %v, want a timeout naming 503", err)
	}
	gone := errors.New("exit status 1")
	if err := AwaitAdmin(context.Background(), admin, "/readyz", func() (bool, error) { return true, gone }); !errors.Is(err, gone) {
		t.Errorf("gone: %v, want %v", err, gone)
	}
	ready.Store(true)
	if err := AwaitAdmin(context.Background(), admin, "/readyz", nil); err != nil {
		t.Errorf("ready: %v", err)
	}
}
