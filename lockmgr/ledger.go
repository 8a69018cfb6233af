package lockmgr

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Entry is one line of /debug/locks: a key held or waited for.
type Entry struct {
	Key     string    `json:"key"`
	Rule    string    `json:"rule"`
	Owner   string    `json:"owner"`
	Session uint64    `json:"session"`
	State   string    `json:"state"` // "held" or "waiting" ("releasing": see redislock's Snapshot)
	Since   time.Time `json:"since"`
	// Holder and Position, for a waiting entry, are what the backend last
	// saw: the holder's owner id (instance/session/transaction) and the
	// place in the key's queue (1: next), empty or 0 when unknown.
	Holder   string `json:"holder,omitempty"`
	Position int    `json:"position,omitempty"`
}

// Ledger records what one Locker's callers hold and wait for, feeds the
// locks_held and lock_waiters gauges, and answers Snapshot. Backends create
// one per Locker with NewLedger. A nil *Ledger records nothing. Safe for
// concurrent use.
type Ledger struct {
	metrics *Metrics
	mu      sync.Mutex
	held    map[*Lease]struct{}
	waiting map[*waitEntry]struct{}
	perKey  map[string]int // waiting entries by key name
}

type waitEntry struct {
	owner    Owner
	key      Key
	since    time.Time
	holder   string // guarded by Ledger.mu, as position and place
	position int
	live     func() (holder string, position int) // live reading, if the backend has one
}

// NewLedger makes a Ledger that also updates m (which may be nil).
func NewLedger(m *Metrics) *Ledger {
	return &Ledger{metrics: m, held: map[*Lease]struct{}{}, waiting: map[*waitEntry]struct{}{}, perKey: map[string]int{}}
}

// Metrics is the Metrics the ledger updates (possibly nil).
func (g *Ledger) Metrics() *Metrics {
	if g == nil {
		return nil
	}
	return g.metrics
}

// Wait records that owner starts waiting for key; End the returned
// Waiting when the wait ends, however it ends. It observes the
// waiters-per-key histogram with the ledger's own waiters for key, this
// one included.
func (g *Ledger) Wait(owner Owner, key Key) *Waiting {
	return g.WaitQueued(owner, key, 0)
}

// WaitQueued is Wait for a backend that knows how many requests wait for
// key across every instance, this one included (depth); depth <= 0 counts
// the ledger's own waiters, as Wait does.
func (g *Ledger) WaitQueued(owner Owner, key Key, depth int) *Waiting {
	if g == nil {
		return nil
	}
	e := &waitEntry{owner: owner, key: key, since: time.Now()}
	g.mu.Lock()
	g.waiting[e] = struct{}{}
	g.perKey[key.Name]++
	if local := g.perKey[key.Name]; depth < local {
		depth = local
	}
	g.mu.Unlock()
	g.metrics.addWaiters(1)
	g.metrics.observeQueue(key.Rule, depth)
	return &Waiting{g: g, e: e}
}

// Waiting is one wait recorded in a Ledger, for /debug/locks: what the
// backend learns while it waits (holder, place in the queue) goes here. A
// nil *Waiting does nothing. Safe for concurrent use.
type Waiting struct {
	g    *Ledger
	e    *waitEntry
	once sync.Once
}

// Saw records what the backend last learned of the wait: the holder's
// owner id ("" if unknown) and the place in the key's queue (1: next to
// get the key; 0 if unknown).
func (w *Waiting) Saw(holder string, position int) {
	if w == nil {
		return
	}
	w.g.mu.Lock()
	if holder != "" {
		w.e.holder = holder
	}
	if position > 0 {
		w.e.position = position
	}
	w.g.mu.Unlock()
}

// Live gives the ledger a way to read the waiter's holder ("" when
// unknown) and place in the queue (1: next; 0: unknown) when a snapshot is
// taken, for a backend whose queue moves without the waiter calling Saw
// (a local queue ahead of the lock service). f must not call the Ledger.
func (w *Waiting) Live(f func() (holder string, position int)) {
	if w == nil {
		return
	}
	w.g.mu.Lock()
	w.e.live = f
	w.g.mu.Unlock()
}

// Granted records that the wait ended in a grant. freed is when this
// instance learned of the release that made it possible (zero if it never
// did: a poll found the key free); the time since is the hand-off latency.
func (w *Waiting) Granted(freed time.Time) {
	if w != nil && !freed.IsZero() {
		w.g.metrics.observeHandoff(w.e.key.Rule, time.Since(freed))
	}
}

// End removes the wait from the ledger (once) and counts its time toward
// the hot-key list.
func (w *Waiting) End() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		g, e := w.g, w.e
		g.mu.Lock()
		delete(g.waiting, e)
		if g.perKey[e.key.Name]--; g.perKey[e.key.Name] <= 0 {
			delete(g.perKey, e.key.Name)
		}
		g.mu.Unlock()
		g.metrics.addWaiters(-1)
		g.metrics.observeWaited(e.key, time.Since(e.since))
	})
}

func (g *Ledger) hold(l *Lease) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.held[l] = struct{}{}
	g.mu.Unlock()
	g.metrics.addHeld(len(l.keys))
}

func (g *Ledger) drop(l *Lease, lost bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.held, l)
	g.mu.Unlock()
	g.metrics.observeEnd(l, lost)
}

// Held lists the leases currently recorded as held.
func (g *Ledger) Held() []*Lease {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Lease, 0, len(g.held))
	for l := range g.held {
		out = append(out, l)
	}
	return out
}

// Snapshot lists held and waited keys, sorted by key then state.
func (g *Ledger) Snapshot() []Entry {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	var out []Entry
	for l := range g.held {
		for _, k := range l.keys {
			out = append(out, Entry{Key: k.Name, Rule: k.Rule, Owner: l.owner.ID(),
				Session: l.owner.Session, State: "held", Since: l.granted})
		}
	}
	var lives []func() (string, int) // parallel to the waiting entries appended below
	first := len(out)
	holders := map[string]string{} // key -> a holder some waiter saw
	for e := range g.waiting {
		out = append(out, Entry{Key: e.key.Name, Rule: e.key.Rule, Owner: e.owner.ID(),
			Session: e.owner.Session, State: "waiting", Since: e.since, Holder: e.holder, Position: e.position})
		lives = append(lives, e.live)
		if e.holder != "" {
			holders[e.key.Name] = e.holder
		}
	}
	g.mu.Unlock()
	for i, f := range lives {
		e := &out[first+i]
		if f != nil { // outside g.mu: f takes the backend's locks
			var holder string
			if holder, e.Position = f(); holder != "" {
				e.Holder = holder
			}
		}
		if e.Holder == "" { // one key, one holder: waiters behind the one
			e.Holder = holders[e.Key] // that asks the service see it too
		}
	}
	slices.SortFunc(out, CompareEntries)
	return out
}

// CompareEntries orders entries as Snapshot lists them: by key, then
// state, then since.
func CompareEntries(a, b Entry) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := strings.Compare(a.State, b.State); c != 0 {
		return c
	}
	return a.Since.Compare(b.Since)
}
