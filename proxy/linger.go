package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Lingering row locks (locks.redis.linger). A statement or transaction
// that held one row lock alone gives it back to the instance, not to
// Redis: the lock lingers there for the configured time, and the next
// statement of any session of the instance that needs that key alone
// takes it over (lockmgr.Set.HandOver: a local hand-off, within the
// Redis backend's bounds on them, so the key goes back to Redis after
// locks.redis.local_handoffs of them or local_handoff_window since
// Redis granted it, and never past an older owner waiting elsewhere).
// When the time is up, it is released as it would have been. An
// application that updates the same rows over and over (a session per
// account, per warehouse) then pays a Redis round trip per run of
// statements, not two per statement; one whose keys seldom repeat pays a
// timer per statement and keeps other instances waiting up to the linger.
//
// Mutual exclusion is the lease's: while it lingers the key is held in
// Redis under its first grant, by no session, and only one statement can
// take it over (unpark removes it under the mutex).

// lingerLocks is an instance's lingering row locks by key name.
type lingerLocks struct {
	mu     sync.Mutex
	rows   map[string]*lingering
	closed bool // Shutdown released them all: nothing lingers any more
	// n is len(rows), read without mu: a guarded statement looks for a
	// lingering lock only when one lingers (never with linger off).
	n atomic.Int32
}

// lingering is one lingering lock: set holds its lease alone.
type lingering struct {
	set   *lockmgr.Set
	timer *time.Timer
}

// park keeps held, a set its owner is done with, lingering when the
// configuration asks for it and held holds one key; false: the caller
// releases it as usual.
func (svc *lockService) park(held *lockmgr.Set) bool {
	d := svc.linger()
	if d <= 0 || held.Len() != 1 || held.Waited() {
		return false // a session of the instance waits: the release hands it on
	}
	key := held.Keys()[0]
	if key.NoHandoff {
		return false // a fenced rule's key: every grant comes from Redis
	}
	name := key.Name
	lg := &svc.lingering
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.closed || lg.rows[name] != nil {
		return false
	}
	if lg.rows == nil {
		lg.rows = make(map[string]*lingering)
	}
	p := &lingering{set: held}
	p.timer = time.AfterFunc(d, func() {
		lg.mu.Lock()
		if lg.rows[name] != p {
			lg.mu.Unlock()
			return // taken over, or released by Shutdown
		}
		delete(lg.rows, name)
		lg.n.Store(int32(len(lg.rows)))
		lg.mu.Unlock()
		svc.releaseBehind(held)
	})
	lg.rows[name] = p
	lg.n.Store(int32(len(lg.rows)))
	return true
}

// unpark takes key's lingering lock out, if one lingers: the caller hands
// it over or releases it.
func (svc *lockService) unpark(key lockmgr.Key) *lockmgr.Set {
	lg := &svc.lingering
	if lg.n.Load() == 0 {
		return nil
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	p := lg.rows[key.Name]
	if p == nil {
		return nil
	}
	// A timer that already fired finds its entry gone and leaves the set
	// to the caller.
	p.timer.Stop()
	delete(lg.rows, key.Name)
	lg.n.Store(int32(len(lg.rows)))
	return p.set
}

// takeLingering gives the session's new owner the lingering lock of
// g's one key, if one lingers and can be handed over (true); a lingering
// lock that cannot is released, and the caller acquires as usual.
func (t *txnLocks) takeLingering(g guard) bool {
	if len(g.keys) != 1 || t.held() {
		return false
	}
	parked := t.svc.unpark(g.keys[0])
	if parked == nil {
		return false
	}
	if held := parked.Keys(); held[0].Rule == g.keys[0].Rule {
		set := t.set()
		if lease, ok := parked.HandOver(g.keys[0].Name, set.Owner()); ok {
			return t.adopt(lease)
		}
	}
	t.svc.releaseBehind(parked)
	return false
}

// releaseBehind releases held, which no session holds any more, on a
// background releaser.
func (svc *lockService) releaseBehind(held *lockmgr.Set) {
	log := svc.log
	svc.releasers.run(func() {
		ctx, cancel := releaseCtxFor(held)
		defer cancel()
		if err := held.Release(ctx); err != nil {
			log.Warn("lock release failed; the locks end with their lease", zap.Error(err))
		}
	})
}

// releaseLingering releases every lingering lock and lets none linger
// from then on (Shutdown: the process is about to end).
func (svc *lockService) releaseLingering(ctx context.Context) {
	lg := &svc.lingering
	lg.mu.Lock()
	lg.closed = true
	rows := lg.rows
	lg.rows = nil
	lg.n.Store(0)
	lg.mu.Unlock()
	for _, p := range rows {
		p.timer.Stop()
		if err := p.set.Release(ctx); err != nil {
			svc.log.Warn("lock release failed; the locks end with their lease", zap.Error(err))
		}
	}
}
