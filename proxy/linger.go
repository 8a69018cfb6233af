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
// statements, not two per statement.
//
// Only a key that comes back lingers: one a statement took over from a
// lingering lock, or took from Redis less than the linger after the
// instance gave it back (or parked it). The first statement of a run goes
// to Redis and back as without linger; the next, and each one after it
// that comes within the linger, keep the lock. Keys that seldom repeat
// (uniform keys over a large table) thus never linger: they cost a note
// of when they were last given back, not a lock held longer.
//
// Mutual exclusion is the lease's: while it lingers the key is held in
// Redis under its first grant, by no session, and only one statement can
// take it over (unpark removes it under the mutex).

// lingerLocks is an instance's lingering row locks by key name. One timer
// serves them all: parking a lock costs a map entry and a place in a
// queue ordered by deadline, not a timer of its own (a statement that
// takes a lock over would otherwise stop one, and every statement that
// gives one back start one).
type lingerLocks struct {
	mu   sync.Mutex
	rows map[string]*lingering
	// queue holds the locks parked, oldest first; an entry taken over
	// stays until the timer passes it (rows no longer names it).
	queue []*lingering
	timer *time.Timer // runs sweep; armed while queue is not empty
	armed bool
	// closed: Shutdown released them all and nothing lingers any more.
	closed bool
	// n is len(rows), read without mu: a guarded statement looks for a
	// lingering lock only when one lingers (never with linger off).
	n atomic.Int32
	// last is when each key was last given back or parked, for keys
	// given back within the linger (older notes are dropped in the order
	// they were made, from notes; a reload that lengthens the linger
	// takes keys noted before it as new); a key lingers only when it
	// comes back.
	last  map[string]time.Time
	notes []keyNote
}

// keyNote is one entry of lingerLocks.last, in the order they were made.
type keyNote struct {
	name string
	at   time.Time
}

// maxKeyNotes bounds the notes of keys given back (kept for the linger):
// past it the oldest are dropped, and such a key is taken as not having
// come back.
const maxKeyNotes = 1 << 16

// note records that key name is given back (or parked) at now, and
// drops the notes older than d. Called with mu held.
func (lg *lingerLocks) note(name string, now time.Time, d time.Duration) {
	for len(lg.notes) > 0 && (now.Sub(lg.notes[0].at) > d || len(lg.notes) >= maxKeyNotes) {
		n := lg.notes[0]
		if lg.last[n.name].Equal(n.at) {
			delete(lg.last, n.name)
		}
		lg.notes[0] = keyNote{}
		lg.notes = lg.notes[1:]
	}
	if lg.last == nil {
		lg.last = make(map[string]time.Time)
	}
	lg.last[name] = now
	lg.notes = append(lg.notes, keyNote{name: name, at: now})
}

// cameBack reports whether the instance gave key name back, or parked
// it, less than the linger ago: a statement that has just taken that key
// from Redis came back for it, and its lock lingers when it ends.
func (svc *lockService) cameBack(name string) bool {
	d := svc.linger()
	lg := &svc.lingering
	if d <= 0 {
		return false
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	at, ok := lg.last[name]
	return ok && time.Since(at) <= d
}

// lingering is one lingering lock: set holds its lease alone until
// deadline.
type lingering struct {
	set      *lockmgr.Set
	name     string
	deadline time.Time
}

// park keeps held, a set its owner is done with, lingering when the
// configuration asks for it, held holds one key and its holder came back
// for that key (took it over from a lingering lock, or took it from
// Redis less than the linger after the instance gave it back: cameBack);
// false: the caller releases it as usual.
func (svc *lockService) park(held *lockmgr.Set, cameBack bool) bool {
	d := svc.linger()
	if d <= 0 || held.Len() != 1 || held.Waited() {
		return false // a session of the instance waits: the release hands it on
	}
	key := held.Keys()[0]
	if key.NoHandoff {
		return false // a fenced rule's key: every grant comes from Redis
	}
	lg := &svc.lingering
	lg.mu.Lock()
	defer lg.mu.Unlock()
	now := time.Now()
	if lg.closed || lg.rows[key.Name] != nil {
		return false
	}
	lg.note(key.Name, now, d)
	if !cameBack {
		return false
	}
	p := &lingering{set: held, name: key.Name, deadline: now.Add(d)}
	if !held.OnWanted(func() { svc.unlingerWanted(p) }) {
		return false // a statement of another instance waits for the row
	}
	if lg.rows == nil {
		lg.rows = make(map[string]*lingering)
	}
	lg.rows[key.Name] = p
	lg.n.Store(int32(len(lg.rows)))
	lg.queue = append(lg.queue, p)
	if !lg.armed {
		lg.armed = true
		if lg.timer == nil {
			lg.timer = time.AfterFunc(d, func() { svc.sweepLingering() })
		} else {
			lg.timer.Reset(d)
		}
	}
	return true
}

// sweepLingering releases the lingering locks whose time is up and arms
// the timer for the next. Deadlines are in parking order except after a
// reload shortened the linger: a lock parked after the change then waits
// for the older ones' deadlines, at most the old linger.
func (svc *lockService) sweepLingering() {
	lg := &svc.lingering
	now := time.Now()
	var expired []*lockmgr.Set
	lg.mu.Lock()
	lg.armed = false
	i := 0
	for ; i < len(lg.queue); i++ {
		p := lg.queue[i]
		if lg.rows[p.name] != p {
			continue // taken over, or released by Shutdown
		}
		if p.deadline.After(now) {
			break
		}
		delete(lg.rows, p.name)
		expired = append(expired, p.set)
	}
	n := copy(lg.queue, lg.queue[i:])
	clear(lg.queue[n:])
	lg.queue = lg.queue[:n]
	if n > 0 && !lg.closed {
		lg.armed = true
		lg.timer.Reset(lg.queue[0].deadline.Sub(now))
	}
	lg.n.Store(int32(len(lg.rows)))
	lg.mu.Unlock()
	for _, set := range expired {
		svc.releaseBehind(set)
	}
}

// unlingerWanted releases p, a lingering lock, at once if it still
// lingers: the lock service said a statement of another instance waits
// for its row (acquire.lua), which should not wait out the linger.
func (svc *lockService) unlingerWanted(p *lingering) {
	lg := &svc.lingering
	lg.mu.Lock()
	if lg.rows[p.name] != p {
		lg.mu.Unlock()
		return // taken over, released when its time was up, or by Shutdown
	}
	// Its queue entry stays for the timer to pass over.
	delete(lg.rows, p.name)
	lg.n.Store(int32(len(lg.rows)))
	lg.mu.Unlock()
	svc.releaseBehind(p.set)
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
	// Its queue entry stays for the timer to pass over.
	delete(lg.rows, key.Name)
	lg.n.Store(int32(len(lg.rows)))
	return p.set
}

// lingersAs reports whether key's lock lingers with the instance under
// owner (lockmgr.Owner.ID of the lease's holder), for the lock lists.
func (svc *lockService) lingersAs(key, owner string) bool {
	lg := &svc.lingering
	if lg.n.Load() == 0 {
		return false
	}
	lg.mu.Lock()
	p := lg.rows[key]
	lg.mu.Unlock()
	return p != nil && p.set.Owner().ID() == owner
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
			t.cameBack = true
			return t.adopt(lease)
		}
	}
	t.svc.releaseBehind(parked)
	return false
}

// takeLingeringNow is acquire's first step when it needs no wait: the
// session's last release has been answered (or parked) and the lock of
// g's one key lingers and can be handed over.
func (t *txnLocks) takeLingeringNow(g guard) bool {
	if t.svc.lingering.n.Load() == 0 {
		return false
	}
	if t.releasing != nil {
		select {
		case <-t.releasing.done:
			t.finished(t.releasing)
		default:
			return false // acquire waits for it within the statement's wait
		}
	}
	if !t.takeLingering(g) {
		return false
	}
	t.awayBefore = nil
	return true
}

// releaseBehind releases held, which no session holds any more, on a
// background releaser.
func (svc *lockService) releaseBehind(held *lockmgr.Set) {
	log := svc.log
	svc.releasers.run(func() {
		ctx, cancel := releaseCtxFor(held)
		defer cancel()
		if err := held.Release(ctx); err != nil {
			log.Warn("lock release failed; the locks are freed once the lock service answers again, or when their lease ends", zap.Error(err))
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
	lg.rows, lg.queue = nil, nil
	lg.n.Store(0)
	if lg.timer != nil {
		lg.timer.Stop()
	}
	lg.mu.Unlock()
	for _, p := range rows {
		if err := p.set.Release(ctx); err != nil {
			svc.log.Warn("lock release failed; the locks are freed once the lock service answers again, or when their lease ends", zap.Error(err))
		}
	}
}
