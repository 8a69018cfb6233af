package proxy

import (
	"testing"
	"time"
)

// TestMemReturn: memory is given back once, after the sessions have fallen
// to half their peak and by returnMinSessions, and after they have
// stopped ending; a small or shallow fall gives nothing back.
func TestMemReturn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		open, end  int
		wantFreeds int
	}{
		{"a burst ends", 1000, 1000, 1},
		{"half of a burst ends", 1000, 500, 1},
		{"less than half ends", 1000, 499, 0},
		{"a small fall", returnMinSessions, returnMinSessions - 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			freed := make(chan struct{}, 4)
			// The timer is far off, so that nothing fires while the test
			// ends sessions (a slow run would otherwise give back before
			// the last ended); the test fires it itself.
			m := &memReturn{after: time.Hour, free: func() { freed <- struct{}{} }}
			for range tc.open {
				m.opened()
			}
			for range tc.end {
				m.ended()
			}
			m.mu.Lock()
			armed := m.armed
			m.mu.Unlock()
			if got := map[bool]int{true: 1}[armed]; got != tc.wantFreeds {
				t.Fatalf("armed %v after %d of %d sessions ended", armed, tc.end, tc.open)
			}
			if tc.wantFreeds == 0 {
				return
			}
			m.mu.Lock()
			m.ends = 0 // sessions have stopped ending
			m.mu.Unlock()
			m.fire()
			<-freed
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.armed || m.peak != m.live || len(freed) != 0 {
				t.Fatalf("after giving back: armed %v, peak %d, live %d, %d more give-backs", m.armed, m.peak, m.live, len(freed))
			}
		})
	}
}
