package redislock

import (
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// pendingReleases are a Locker's releases held for a ride (holdRelease)
// until Redis answers them: their keys are still taken there, and
// Snapshot lists them so an operator looking for who holds a row sees
// it.
type pendingReleases struct {
	mu   sync.Mutex
	rels map[*leasebook.Held]pendingRelease
}

type pendingRelease struct {
	owner lockmgr.Owner
	keys  []lockmgr.Key
	since time.Time // when the release was held
}

func (p *pendingReleases) hold(h *leasebook.Held, owner lockmgr.Owner, keys []lockmgr.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rels == nil {
		p.rels = map[*leasebook.Held]pendingRelease{}
	}
	p.rels[h] = pendingRelease{owner: owner, keys: keys, since: time.Now()}
}

func (p *pendingReleases) done(h *leasebook.Held) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.rels, h)
}

// add appends an entry per key of each pending release to out, and
// reports whether it appended any.
func (p *pendingReleases) add(out *[]lockmgr.Entry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rels {
		for _, k := range r.keys {
			*out = append(*out, lockmgr.Entry{Key: k.Name, Rule: k.Rule, Owner: r.owner.ID(),
				Session: r.owner.Session, State: "releasing", Since: r.since})
		}
	}
	return len(p.rels) > 0
}
