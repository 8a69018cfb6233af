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
	State   string    `json:"state"` // "held" or "waiting"
	Since   time.Time `json:"since"`
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
	owner Owner
	key   Key
	since time.Time
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

// Wait records that owner starts waiting for key; call the returned func
// when the wait ends, however it ends. It observes the waiters-per-key
// histogram with the ledger's own waiters for key, this one included.
func (g *Ledger) Wait(owner Owner, key Key) (done func()) {
	return g.WaitQueued(owner, key, 0)
}

// WaitQueued is Wait for a backend that knows how many requests wait for
// key across every instance, this one included (depth); depth <= 0 counts
// the ledger's own waiters, as Wait does.
func (g *Ledger) WaitQueued(owner Owner, key Key, depth int) (done func()) {
	if g == nil {
		return func() {}
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
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.waiting, e)
			if g.perKey[key.Name]--; g.perKey[key.Name] <= 0 {
				delete(g.perKey, key.Name)
			}
			g.mu.Unlock()
			g.metrics.addWaiters(-1)
			g.metrics.observeWaited(key, time.Since(e.since))
		})
	}
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
	for e := range g.waiting {
		out = append(out, Entry{Key: e.key.Name, Rule: e.key.Rule, Owner: e.owner.ID(),
			Session: e.owner.Session, State: "waiting", Since: e.since})
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if c := strings.Compare(a.State, b.State); c != 0 {
			return c
		}
		return a.Since.Compare(b.Since)
	})
	return out
}
