package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// errNotAcked marks a grant that was not known to be on
// Options.MinReplicasAck replicas in time.
var errNotAcked = errors.New("redislock: grant not acknowledged by enough replicas")

// acquireAcked is Acquire with Options.MinReplicasAck: a lease is handed
// out only once each of its grants is on that many replicas, so a
// failover to one of them keeps it. A grant not acknowledged in time is
// given back and the keys are asked for again, until ctx ends: then the
// wait timed out (lockmgr.ErrWaitTimeout), naming why.
func (l *Locker) acquireAcked(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	backoff := 10 * time.Millisecond
	var nack error // the last grant not acknowledged in this wait
	for {
		lease, err := l.acquire(ctx, owner, keys)
		if err != nil {
			if nack != nil && errors.Is(err, lockmgr.ErrWaitTimeout) {
				return nil, fmt.Errorf("%w (%w)", err, nack)
			}
			return nil, err
		}
		k, aerr := l.replicasAck(ctx, keys)
		if aerr == nil {
			return lease, nil
		}
		leasebook.CleanupWithin(ctx, func() {
			rctx, cancel := l.freshCtx()
			defer cancel()
			_ = lease.Release(rctx)
		})
		if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && !time.Now().Before(d) {
			// The answer's socket deadline (ctx's) fired before ctx's
			// own timer was seen: the wait is over all the same.
			<-ctx.Done()
		}
		if ctx.Err() != nil {
			if nack == nil || errors.Is(aerr, errNotAcked) {
				nack = fmt.Errorf("rule %q key %q: replica acknowledgement: %w", k.Rule, k.Name, aerr)
			}
			return nil, fmt.Errorf("%w (%w)", lockmgr.WaitError(ctx, k), nack)
		}
		if unavailable(aerr) && !errors.Is(aerr, errNotAcked) && !lateAnswer(aerr) {
			return nil, fmt.Errorf("%w: rule %q key %q: replica acknowledgement: %w", lockmgr.ErrUnavailable, k.Rule, k.Name, aerr)
		}
		nack = fmt.Errorf("rule %q key %q: %w", k.Rule, k.Name, aerr)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (%w)", lockmgr.WaitError(ctx, k), nack)
		case <-t.C:
		}
		backoff = min(2*backoff, l.opt.WaitSlice)
	}
}

// ackSlack is the time left in an acquire's wait for WAIT's answer to
// arrive after WAIT's own timeout.
const ackSlack = 50 * time.Millisecond

// replicasAck waits for the grants of keys to reach MinReplicasAck
// replicas, each for at most WaitSlice (or what is left of ctx). It
// returns the first key that did not and why.
func (l *Locker) replicasAck(ctx context.Context, keys []lockmgr.Key) (lockmgr.Key, error) {
	for _, k := range keys {
		timeout := l.opt.WaitSlice
		if d, ok := ctx.Deadline(); ok {
			// Leave the answer time to arrive before ctx ends.
			timeout = min(timeout, time.Until(d)-ackSlack)
		}
		if err := l.ackKey(ctx, l.names(k.Name), max(timeout, time.Millisecond)); err != nil {
			return k, err
		}
	}
	return lockmgr.Key{}, nil
}

// ackKey makes sure the master's latest write to key n is on
// MinReplicasAck replicas. WAIT counts what the replicas acknowledged of
// its own connection's writes, so on one connection to the master
// holding the key it first writes again what the grant wrote last (the
// fence counter's expiry), which the master replicates after the grant,
// and then WAITs for that. A fence counter missing there means the master
// does not have the grant (a failover lost it).
func (l *Locker) ackKey(ctx context.Context, n names, timeout time.Duration) error {
	c, err := l.masterClient(ctx, n.fence)
	if err != nil {
		return err
	}
	conn := c.Conn()
	defer conn.Close()
	// Two calls, not one pipeline: go-redis gives WAIT a read timeout of
	// its own timeout (plus slack), a pipeline only ReadTimeout.
	touched, err := conn.PExpire(ctx, n.fence, l.opt.FenceTTL).Result()
	if err != nil {
		return err
	}
	got, err := conn.Wait(ctx, l.opt.MinReplicasAck, timeout).Result()
	switch {
	case err != nil:
		return err
	case !touched:
		return fmt.Errorf("%w: the master holds no grant (its fence counter is gone)", errNotAcked)
	case got < int64(l.opt.MinReplicasAck):
		return fmt.Errorf("%w: %d of %d replicas within %v", errNotAcked, got, l.opt.MinReplicasAck, timeout.Round(time.Millisecond))
	}
	return nil
}

// masterClient is the client of the master that holds key.
func (l *Locker) masterClient(ctx context.Context, key string) (*redis.Client, error) {
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redislock: min_replicas_ack needs a server, Sentinel or Cluster client, not %T", l.rdb)
}

// lateAnswer reports whether err is a read that timed out: WAIT's answer
// came later than its own timeout allowed, as on a busy machine. A slow
// server is not a down one: the grant counts as not acknowledged and is
// asked for again while the wait lasts.
func lateAnswer(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
