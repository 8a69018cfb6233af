package redislock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// lastFastFence is the last fence a fast-path grant of this process took.
var lastFastFence atomic.Uint64

// fastFence is the fence of a fast-path grant: this host's time in µs,
// above every fence this process gave before. The string a SET NX writes
// carries one read before the request; the lease reports one read after
// the reply, so above every fence granted before the key was free. A key whose rule fences
// writes never takes the fast path (its fences come from the server's
// counter and clock); for the others the number only orders grants as
// far as the instances' clocks agree, and the acquire script carries it
// into the key's counter once the key is contended, so a grant there is
// above it.
func fastFence() uint64 {
	now := uint64(time.Now().UnixMicro())
	for {
		last := lastFastFence.Load()
		f := max(now, last+1)
		if lastFastFence.CompareAndSwap(last, f) {
			return f
		}
	}
}

// fastable reports whether k may be taken by the fast path: its rule does
// not fence writes with it, grants are not being refused (a server that
// may evict lock keys), and no replica acknowledgement is waited for
// (ackKey proves a grant on the master by the fence counter, which the
// fast path does not write). A fast grant is checked after the fact like
// any other (checkRestart).
func (l *Locker) fastable(k lockmgr.Key) bool {
	return !k.NoHandoff && l.opt.MinReplicasAck == 0 && l.evict.risk() == ""
}

// fastSet queues on p the fast path's acquire of k for tok and owner: one
// SET NX PX of the string the scripts read a fast-path holder from
// (#tok ':' tok #own ':' own prio ':' fence ':' wound channel; see
// release.lua). It fails, without a script, when anyone holds the key,
// a release reserved it for its waiters, or (in a short window) a
// holder's lease ran out under waiters that have not asked again yet.
func (l *Locker) fastSet(ctx context.Context, p interface {
	Do(context.Context, ...any) *redis.Cmd
}, lock, tok, own string, prio int64, fence uint64) *redis.Cmd {
	ch := l.woundChannel()
	b := make([]byte, 0, 48+len(tok)+len(own)+len(ch))
	b = strconv.AppendInt(b, int64(len(tok)), 10)
	b = append(b, ':')
	b = append(b, tok...)
	b = strconv.AppendInt(b, int64(len(own)), 10)
	b = append(b, ':')
	b = append(b, own...)
	b = strconv.AppendInt(b, prio, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, fence, 10)
	b = append(b, ':')
	b = append(b, ch...)
	return p.Do(ctx, "set", lock, b, "nx", "px", l.opt.TTL.Milliseconds())
}

// fastGranted reads a fastSet's reply: true if the key was taken.
func fastGranted(c *redis.Cmd) (bool, error) {
	v, err := c.Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return v == "OK", nil
}
