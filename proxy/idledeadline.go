package proxy

import (
	"errors"
	"os"
	"time"
)

// The idle timeout (proxy.idle_timeout, or the wait_timeout of a
// multiplexing session that holds no primary connection) is the client
// connection's read deadline while the session waits for its next
// command. Setting a deadline and clearing it around every command put a
// timer on the runtime's heap and took it off again each time, on the
// path of every statement. So the deadline stays set across commands: a
// wait sets it again only when the one set is later than the wait's own
// (the timeout got shorter) or earlier by more than idleSlack. A deadline
// that passes before the session has been idle the whole timeout (it was
// set for an earlier wait) is moved to the right time and the wait goes
// on: a session is never ended early, nor late. What reads the client in
// the middle of a command (the content of a LOAD DATA LOCAL) clears the
// deadline first, as a command's reads had none before.

// idleSlack is how much earlier than a wait's own deadline the one set
// on the connection may be before the wait sets it again: a quarter of
// the timeout, at most a second, so a busy session moves its deadline at
// most once a second, and wakes early at most once per wait that lasts
// that long.
func idleSlack(idle time.Duration) time.Duration { return min(idle/4, time.Second) }

// keepIdleDeadline makes sure the client connection's read deadline is
// at, or at most idleSlack(idle) earlier.
func (s *session) keepIdleDeadline(at time.Time, idle time.Duration) {
	set := s.idleAt
	if want := at.UnixNano(); set == 0 || set > want || want-set > int64(idleSlack(idle)) {
		s.setIdleDeadline(at)
	}
}

// setIdleDeadline sets the client connection's read deadline to at.
func (s *session) setIdleDeadline(at time.Time) {
	_ = s.conn.SetReadDeadline(at)
	s.idleAt = at.UnixNano()
}

// clearIdleDeadline clears the client connection's read deadline if the
// idle timeout set one.
func (s *session) clearIdleDeadline() {
	if s.idleAt != 0 {
		_ = s.conn.SetReadDeadline(time.Time{})
		s.idleAt = 0
	}
}

// forgetIdleDeadline records that the client connection's read deadline
// was set or cleared by something else (COM_CHANGE_USER's exchange,
// shutdown): none is kept for the idle timeout.
func (s *session) forgetIdleDeadline() { s.idleAt = 0 }

// idleFiredEarly reports whether err is a read deadline that passed while
// the session, waiting since since with timeout idle, has not yet been
// idle that long.
func idleFiredEarly(err error, since time.Time, idle time.Duration) bool {
	return !since.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) && time.Since(since) < idle
}
