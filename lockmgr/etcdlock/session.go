package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// session is one etcd lease of a Locker and the leases (lockmgr) it
// carries; the Session is guarded by Locker.mu.
type session struct {
	id  clientv3.LeaseID
	ttl time.Duration // as granted by etcd
	*leasebook.Session
}

// validity is how long after sending a grant or keep-alive the lease is
// known alive: its ttl less a margin for clock drift.
func validity(ttl time.Duration) time.Duration { return leasebook.Validity(ttl) }

// session returns the live session, granting one if there is none.
func (l *Locker) session(ctx context.Context) (*session, error) {
	l.sessMu.Lock()
	defer l.sessMu.Unlock()
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s != nil {
		return s, nil
	}
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	secs := int64((l.opt.TTL + time.Second - 1) / time.Second)
	sent := time.Now()
	resp, err := l.cli.Grant(octx, secs)
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s = &session{id: resp.ID, ttl: ttl, Session: leasebook.NewSession(sent.Add(validity(ttl)))}
	l.mu.Lock()
	if l.closed() {
		l.mu.Unlock()
		rctx, rcancel := l.freshCtx()
		_, _ = l.cli.Revoke(rctx, s.id)
		rcancel()
		return nil, errClosedNow
	}
	l.sess = s
	l.wg.Add(1)
	l.mu.Unlock()
	go l.keepAlive(s)
	return s, nil
}

var errClosedNow = errors.New("etcdlock: locker closed")

// keepAlive renews s every ttl/3 (sooner after a failure) until it is
// lost or the Locker closes.
func (l *Locker) keepAlive(s *session) {
	defer l.wg.Done()
	interval := s.ttl / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-s.Done():
			return
		case <-t.C:
		}
		next := interval
		ctx, cancel := l.opCtx(l.ctx)
		sent := time.Now()
		resp, err := l.cli.KeepAliveOnce(ctx, s.id)
		cancel()
		switch {
		case l.closed():
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.ledger.Metrics().ObserveRenewals(lockmgr.RenewLost, 1)
			l.loseSession(s, errLeaseGone)
			return
		case err != nil:
			l.ledger.Metrics().ObserveRenewals(lockmgr.RenewError, 1)
			l.opt.Logger.Warn("etcd lease keep-alive failed; leases stay valid until their deadline", zap.Error(err))
			next = interval / 4
		default:
			l.ledger.Metrics().ObserveRenewals(lockmgr.RenewOK, 1)
			l.extendSession(s, sent.Add(validity(time.Duration(resp.TTL)*time.Second)))
		}
		l.mu.Lock()
		left := time.Until(s.ValidUntil())
		l.mu.Unlock()
		if left <= 0 {
			l.loseSession(s, errRunOut)
			return
		}
		t.Reset(min(next, left))
	}
}

// extendSession moves the validity of s and of every lease it carries.
func (l *Locker) extendSession(s *session, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Extend(until)
}

// loseSession ends s: every lease it carries is lost with cause, and the
// next Acquire grants a new session.
func (l *Locker) loseSession(s *session, cause error) {
	s.Lose(&l.mu, cause, l.opt.Logger, func() {
		if l.sess == s {
			l.sess = nil
		}
	})
}

// leaseAlive asks etcd whether lease id still exists.
func (l *Locker) leaseAlive(ctx context.Context, id clientv3.LeaseID) (bool, error) {
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	resp, err := l.cli.TimeToLive(octx, id)
	if err != nil {
		return false, err
	}
	return resp.TTL > 0, nil
}
