package proxy

import (
	"sync"
	"time"
)

// Failed logins are slowed down per account and client address: after
// freeLogins failures within throttleWindow, each further attempt waits
// before its answer, doubling up to maxLoginDelay.
const (
	freeLogins     = 3
	throttleWindow = time.Minute
	baseLoginDelay = 100 * time.Millisecond
	maxLoginDelay  = 5 * time.Second
	maxTracked     = 10000
)

// loginThrottle counts recent failed logins per client address. Safe for
// concurrent use.
type loginThrottle struct {
	mu       sync.Mutex
	failures map[string]*failures
}

type failures struct {
	n    int
	last time.Time
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{failures: make(map[string]*failures)}
}

// delay is how long an authentication attempt from host must wait.
func (t *loginThrottle) delay(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.failures[host]
	if f == nil || time.Since(f.last) > throttleWindow || f.n < freeLogins {
		return 0
	}
	d := baseLoginDelay << min(f.n-freeLogins, 6)
	return min(d, maxLoginDelay)
}

// failed records a failed login from host.
func (t *loginThrottle) failed(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.failures[host]
	if f == nil {
		if len(t.failures) >= maxTracked {
			t.prune()
		}
		f = &failures{}
		t.failures[host] = f
	} else if time.Since(f.last) > throttleWindow {
		f.n = 0
	}
	f.n++
	f.last = time.Now()
}

// succeeded forgets host's failures.
func (t *loginThrottle) succeeded(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, host)
}

// prune drops entries older than the window (caller holds mu).
func (t *loginThrottle) prune() {
	for h, f := range t.failures {
		if time.Since(f.last) > throttleWindow {
			delete(t.failures, h)
		}
	}
}
