package redislock

import (
	"context"
	"fmt"
	"runtime"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return leasebook.Acquire(l.ledger, l.closed(), keys, func(keys []lockmgr.Key) (*lockmgr.Lease, error) {
		h := l.book.Begin(l.token(owner), owner)
		handoff := l.opt.LocalHandoffs > 0 && len(keys) == 1 && !keys[0].NoHandoff
		var handed *leasebook.Held
		fences, err := leasebook.TakeAll(keys, func(k lockmgr.Key) (uint64, error) {
			f, hh, err := l.acquireKey(ctx, h, k, handoff)
			handed = hh
			return f, err
		}, func() { l.release(h) })
		if err != nil {
			return nil, err
		}
		if handed != nil {
			// The lease another owner of this Locker released came to us:
			// our own acquire took nothing and is dropped.
			l.book.Drop(h)
			h, fences = handed, l.book.Fences(handed)
		}
		return l.book.Attach(h, keys, fences, l.ledger,
			func(ctx context.Context) error { return l.releaseCtx(ctx, h) }, l.freshCtx)
	})
}

// releaseCtx is the lease's release: to the next local waiter when it may
// be handed off (no round trip), else one pipelined round trip.
func (l *Locker) releaseCtx(ctx context.Context, h *leasebook.Held) error {
	if l.book.HandOff(h, l.opt.LocalHandoffs, l.opt.LocalHandoffWindow) {
		// The new holder's goroutine is now runnable on this P: let it
		// run (and send the statement it waited to send) before the
		// releasing session goes on to answer its own client, so the key
		// is not idle meanwhile.
		runtime.Gosched()
		return nil
	}
	keys, _ := l.book.StartRelease(h)
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	err := l.releaseKeys(ctx, h.Tok, keys, l.book.StaleTickets(h)...)
	l.book.Forget(h)
	if err != nil {
		if unavailable(err) {
			return fmt.Errorf("%w: release: %w", lockmgr.ErrUnavailable, err)
		}
		return fmt.Errorf("redislock: release: %w", err)
	}
	return nil
}

// release gives back what h holds, on a fresh bounded context, after a
// failed or abandoned acquire.
func (l *Locker) release(h *leasebook.Held) {
	ctx, cancel := l.freshCtx()
	defer cancel()
	if err := l.releaseCtx(ctx, h); err != nil {
		owner, _ := l.book.OwnerOf(h)
		l.opt.Logger.Warn("lock release failed; the lock expires with its lease",
			zap.String("owner", owner.ID()), zap.Error(err))
	}
}

// releaseKeys runs the release script for keys in one pipeline. Each call
// also takes the tickets stale (of waiters the lease was handed to) off
// its key's queue.
func (l *Locker) releaseKeys(ctx context.Context, tok string, keys []lockmgr.Key, stale ...string) error {
	if len(keys) == 0 {
		return nil
	}
	args := make([]any, 0, 2+len(stale))
	args = append(args, tok, "")
	for _, t := range stale {
		args = append(args, t)
	}
	_, err := l.sc.pipelined(ctx, l.rdb, func(p redis.Pipeliner) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			n := l.names(k.Name)
			a := append([]any(nil), args...)
			a[1] = n.channel
			cmds[i] = l.sc.release.EvalSha(ctx, p, n.keys()[:3], a...)
		}
		return cmds
	})
	return err
}
