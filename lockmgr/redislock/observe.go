package redislock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.Observer = (*Locker)(nil)

// Observe implements lockmgr.Observer: observe.lua of
// lockmgr/internal/grantscript once per key, all in one pipeline (one
// round trip; on a Cluster, one per node, in parallel). It reads the lock
// hash and never touches the lock, its queue or its fence. A notes hash
// lockproxy:{K}:o beside the lock holds the observers' notes; it expires
// one ttl after the last one was made. With LocalHandoffs the holder
// named is the owner Redis granted the lease to, which may since have
// passed it to another owner of the same instance.
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if l.closed() {
		return nil, lockmgr.ErrClosed
	}
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	id, ttl := owner.ID(), l.opt.TTL.Milliseconds()
	held := l.batch.takeSent(ctx) // a release held for a ride goes first: it was made before
	cmds, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		for _, c := range held {
			c.cmds = c.queue(p)
		}
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			n := l.names(k.Name)
			cmds[i] = l.sc.observe.EvalSha(ctx, p, []string{n.lock, n.notes}, id, ttl)
		}
		return cmds
	})
	l.batch.landed(held)
	if err != nil && cmdsErr(cmds) == nil {
		err = nil // only a held release failed; landed sends it again
	}
	if err != nil {
		return nil, observeErr("observe", err)
	}
	var out map[string][]string
	for i, c := range cmds {
		v, err := c.StringSlice()
		if err != nil {
			return nil, observeErr("observe", err)
		}
		if others := inWay(v); len(others) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[keys[i].Name] = others
		}
	}
	return out, nil
}

// inWay is observe.lua's reply without its empty holder.
func inWay(v []string) []string {
	if len(v) > 0 && v[0] == "" {
		return v[1:]
	}
	return v
}

// EndObserve implements lockmgr.Observer: HDEL of owner's note on every
// key, in one pipeline.
func (l *Locker) EndObserve(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	id := owner.ID()
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.HDel(ctx, l.names(k.Name).notes, id)
		}
		return nil
	})
	if err != nil {
		return observeErr("end observe", err)
	}
	return nil
}

func observeErr(what string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("%w: %s: %w", lockmgr.ErrUnavailable, what, err)
	}
	return fmt.Errorf("redislock: %s: %w", what, err)
}
