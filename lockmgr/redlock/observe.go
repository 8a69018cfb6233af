package redlock

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/grantscript"
)

var observeScript = redis.NewScript(grantscript.ObserveSource)

var _ lockmgr.Observer = (*Locker)(nil)

// Observe implements lockmgr.Observer: observe.lua of
// lockmgr/internal/grantscript on every server at once, one pipeline
// each, with the notes in lockproxy:{K}:o beside each server's lock. An
// owner is in the way when a majority of the servers say so, as a lock is
// held when a majority granted it: a grant that only a minority made (and
// is being undone) is no holder, and of two owners that noted a key at
// the same moment, the one most servers saw first goes first.
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if l.e.Closed() {
		return nil, lockmgr.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, l.st.op)
	defer cancel()
	s, id := l.st, owner.ID()
	replies := make([][][]string, len(s.srv))
	errs := s.each(func(i int, c redis.UniversalClient) error {
		var cmds []*redis.Cmd
		err := s.pipelined(ctx, c, func(p redis.Pipeliner) []*redis.Cmd {
			cmds = make([]*redis.Cmd, len(keys))
			for j, k := range keys {
				n := s.names(k.Name)
				cmds[j] = observeScript.EvalSha(ctx, p, []string{n[0], n[0] + ":o"}, id, s.ttl)
			}
			return cmds
		})
		if err != nil {
			return err
		}
		replies[i] = make([][]string, len(keys))
		for j, c := range cmds {
			if replies[i][j], err = c.StringSlice(); err != nil {
				return err
			}
		}
		return nil
	})
	if err := s.enough("observe", errs); err != nil {
		return nil, err
	}
	var out map[string][]string
	for j, k := range keys {
		if others := s.inWay(replies, j); len(others) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k.Name] = others
		}
	}
	return out, nil
}

// inWay counts the servers' replies about key j: the owners a majority
// names, holders first, each list in the order the servers gave it.
func (s *store) inWay(replies [][][]string, j int) []string {
	var order, holders []string
	seen := map[string]int{}
	for _, r := range replies {
		if r == nil || len(r[j]) == 0 {
			continue
		}
		for i, id := range r[j] {
			if id == "" {
				continue
			}
			if i == 0 && !slices.Contains(holders, id) {
				holders = append(holders, id)
			}
			if seen[id] == 0 {
				order = append(order, id)
			}
			seen[id]++
		}
	}
	// Holders first, then notes, keeping the servers' order within each.
	slices.SortStableFunc(order, func(a, b string) int {
		ha, hb := slices.Contains(holders, a), slices.Contains(holders, b)
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	return slices.DeleteFunc(order, func(id string) bool { return seen[id] < s.quorum })
}

// EndObserve implements lockmgr.Observer: HDEL of owner's note on every
// server, one pipeline each.
func (l *Locker) EndObserve(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	ctx, cancel := context.WithTimeout(ctx, l.st.op)
	defer cancel()
	s, id := l.st, owner.ID()
	errs := s.each(func(_ int, c redis.UniversalClient) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.HDel(ctx, s.names(k.Name)[0]+":o", id)
			}
			return nil
		})
		return err
	})
	return s.enough("end observe", errs)
}
