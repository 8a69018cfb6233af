package zklock

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// session is one ZooKeeper session of the Locker's connection and the
// leases (lockmgr) it carries; the Session is guarded by Locker.mu.
type session struct {
	id int64
	*leasebook.Session
}

// timeout is the session timeout validity is measured with: the one asked
// for, or the one the server negotiated if that is lower.
func (l *Locker) timeout() time.Duration {
	t := l.opt.TTL
	if ms := l.negotiated.Load(); ms > 0 && time.Duration(ms)*time.Millisecond < t {
		t = time.Duration(ms) * time.Millisecond
	}
	return t
}

// validity is how long after sending a request the server answered the
// session is known alive: the timeout less a margin for clock drift.
func (l *Locker) validity() time.Duration {
	return leasebook.Validity(l.timeout())
}

// tracked runs a request like call and then notes that the server heard
// the session at or after the request was sent. It returns the session the
// request ran in, or errSession when the session changed meanwhile.
func tracked[T any](ctx context.Context, l *Locker, f func() (T, error)) (T, *session, error) {
	before := l.conn.SessionID()
	sent := time.Now()
	v, err := call(ctx, l, f)
	if err != nil {
		return v, nil, err
	}
	after := l.conn.SessionID()
	if after == 0 || (before != 0 && before != after) {
		return v, nil, errSession
	}
	return v, l.touch(after, sent), nil
}

// touch extends the validity of session sid (which it records as current,
// losing an older one) to sent plus validity, and returns it.
func (l *Locker) touch(sid int64, sent time.Time) *session {
	until := sent.Add(l.validity())
	l.mu.Lock()
	old := l.sess
	if old != nil && old.id == sid {
		old.Extend(until)
		l.mu.Unlock()
		return old
	}
	s := &session{id: sid, Session: leasebook.NewSession(until)}
	l.sess = s
	l.mu.Unlock()
	if old != nil { // a new session id: the old session expired
		l.loseSession(old, errExpired)
	}
	return s
}

// onEvent is the client's event callback: a session expiry loses the
// current session's leases.
func (l *Locker) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession || ev.State != zk.StateExpired {
		return
	}
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s != nil {
		l.loseSession(s, errExpired)
	}
}

// heartbeat asks the server something every timeout/3 while leases are
// held, so their validity is extended, and loses them when it runs out.
func (l *Locker) heartbeat() {
	defer l.wg.Done()
	t := time.NewTimer(l.timeout() / 3)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		next := l.timeout() / 3
		l.mu.Lock()
		s := l.sess
		busy := s != nil && s.Busy()
		l.mu.Unlock()
		if !busy {
			t.Reset(next)
			continue
		}
		_, _, err := tracked(l.ctx, l, func() (bool, error) {
			ok, _, err := l.conn.Exists("/")
			return ok, err
		})
		switch {
		case err != nil && !l.closed():
			l.ledger.Metrics().ObserveRenewals(lockmgr.RenewError, 1)
			l.opt.Logger.Warn("ZooKeeper heartbeat failed; leases stay valid until their deadline", zap.Error(err))
			next /= 4
		case err == nil:
			l.ledger.Metrics().ObserveRenewals(lockmgr.RenewOK, 1)
		}
		l.mu.Lock()
		left := time.Until(s.ValidUntil())
		l.mu.Unlock()
		if left <= 0 {
			l.loseSession(s, errRunOut)
		} else if left < next {
			next = left
		}
		t.Reset(next)
	}
}

// loseSession ends s: every lease it carries is lost with cause.
func (l *Locker) loseSession(s *session, cause error) {
	s.Lose(&l.mu, cause, l.opt.Logger, func() {
		if l.sess == s {
			l.sess = nil
		}
	})
}
