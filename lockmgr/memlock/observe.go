package memlock

import (
	"context"
	"slices"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.Observer = (*Locker)(nil)

// Observe implements lockmgr.Observer. Memory notes have no ttl: they
// last until EndObserve, as the process does.
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.isClosed() {
		return nil, lockmgr.ErrClosed
	}
	id := owner.ID()
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	if l.t.notes == nil {
		l.t.notes = map[string][]string{}
	}
	var out map[string][]string
	for _, k := range keys {
		var others []string
		if ks := l.t.keys[k.Name]; ks != nil && ks.holder.ID() != id {
			others = append(others, ks.holder.ID())
		}
		notes := l.t.notes[k.Name]
		i := slices.Index(notes, id)
		if i < 0 {
			i = len(notes)
			l.t.notes[k.Name] = append(notes, id)
		}
		for _, n := range notes[:i] {
			if !slices.Contains(others, n) {
				others = append(others, n)
			}
		}
		if len(others) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k.Name] = others
		}
	}
	return out, nil
}

// EndObserve implements lockmgr.Observer.
func (l *Locker) EndObserve(_ context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	id := owner.ID()
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	for _, k := range keys {
		notes := slices.DeleteFunc(l.t.notes[k.Name], func(n string) bool { return n == id })
		if len(notes) == 0 {
			delete(l.t.notes, k.Name)
		} else {
			l.t.notes[k.Name] = notes
		}
	}
	return nil
}
