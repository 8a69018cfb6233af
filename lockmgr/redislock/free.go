package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// takeFree asks for every key of a multi-key Acquire at once, in one
// pipeline (one round trip, per cluster node), without queueing: the keys
// nobody holds or waits for are granted by the acquire script's
// uncontended path, or by a SET NX for a key whose rule does not fence
// writes (fast.go), and recorded as held by h; their fences are returned
// by key name. The others are left to acquireKey, which waits for them in
// turn as it would have without this round. A key this Locker holds or
// waits for locally is not asked for here (it has local waiters to serve
// first), nor is any while the restart or eviction guard wants a grant
// checked: those go the one-key way, which checks.
func (l *Locker) takeFree(ctx context.Context, h *leasebook.Held, keys []lockmgr.Key) map[string]uint64 {
	if len(keys) < 2 || l.restart.remaining() > 0 || l.evict.due() || l.evict.risk() != "" {
		return nil
	}
	ask := make([]lockmgr.Key, 0, len(keys))
	for _, k := range keys {
		if _, _, held := l.book.LocalHolder(k.Name); !held && l.book.Waiting(k.Name) == 0 {
			ask = append(ask, k)
		}
	}
	if len(ask) < 2 {
		return nil
	}
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	dials := l.restart.dials.Load()
	sent := time.Now()
	fast := make([]uint64, len(ask)) // the fast path's fence per key, 0 for the script
	for i, k := range ask {
		if l.fastable(k) {
			fast[i] = fastFence()
		}
	}
	prio := l.book.Priority(h.Owner)
	held := l.batch.take()
	cmds, _ := l.sc.pipelined(octx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		for _, c := range held {
			c.cmds = c.queue(p) // the releases held for a ride go first
		}
		out := make([]*redis.Cmd, len(ask))
		for i, k := range ask {
			if fast[i] != 0 {
				out[i] = l.fastSet(octx, p, l.names(k.Name).lock, h.Tok, h.Owner.ID(), prio, fast[i])
				continue
			}
			out[i] = l.sc.acquire.EvalSha(octx, p, l.names(k.Name).keys(),
				h.Tok, h.Owner.ID(), l.book.Priority(h.Owner), l.opt.TTL.Milliseconds(),
				l.ticketTTL().Milliseconds(), l.woundChannel(), "0",
				l.opt.FenceTTL.Milliseconds(), "", 0, "", "")
		}
		return out
	})
	l.batch.landed(held)
	var got []lockmgr.Key
	fences := map[string]uint64{}
	for i, c := range cmds {
		if i >= len(ask) {
			break
		}
		if fast[i] != 0 {
			if ok, _ := fastGranted(c); ok {
				got = append(got, ask[i])
				fences[ask[i].Name] = fastFence() // read after the reply, see attempt.run
			}
			continue
		}
		v, err := c.Slice()
		if err != nil {
			continue
		}
		if r, err := parseTry(v); err == nil && r.status == 1 {
			got = append(got, ask[i])
			fences[ask[i].Name] = r.fence
		}
	}
	if len(got) > 0 && l.restart.dials.Load() != dials {
		// A connection was made meanwhile: the server may have restarted
		// and forgotten leases. Give these back; the one-key way asks
		// again and checks the server's uptime.
		uctx, ucancel := l.freshCtx()
		defer ucancel()
		_ = l.releaseKeys(uctx, h.Tok, got, false)
		return nil
	}
	until := sent.Add(leasebook.Validity(l.opt.TTL))
	for _, k := range got {
		l.book.Granted(h, k, fences[k.Name], until)
	}
	return fences
}
