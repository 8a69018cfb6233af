package zklock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// attempt is the state of one Acquire's wait for one key.
type attempt struct {
	l        *Locker
	h        *held
	st       *leasebook.OwnerState
	k        lockmgr.Key
	dir      string
	me       node
	wounds   map[string]bool // holder znodes wounded
	waitDone *lockmgr.Waiting
	freed    time.Time // when the entry ahead went away (hand-off clock)
	traced   bool      // the holder was read (once per wait)
	holder   string    // its owner id
}

// queue is one read of a key's znodes.
type queue struct {
	ahead []node // before the own znode, in sequence order
	mine  bool   // the own znode exists
}

// acquireKey takes key k for h, waiting as long as ctx allows. Its znode is
// recorded in h before it is created, so a failed acquire deletes it.
func (l *Locker) acquireKey(ctx context.Context, h *held, st *leasebook.OwnerState, k lockmgr.Key) (uint64, error) {
	a := &attempt{l: l, h: h, st: st, k: k, dir: l.keyDir(k.Name), wounds: map[string]bool{}}
	defer func() { a.waitDone.End() }()
	if err := a.create(ctx); err != nil {
		return 0, err
	}
	czxid := a.statAsync(ctx)
	for {
		q, err := a.read(ctx)
		if err != nil {
			return 0, classify(ctx, k, err)
		}
		if !q.mine {
			return 0, fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, k.Rule, k.Name, errNodeGone)
		}
		if len(q.ahead) == 0 {
			a.waitDone.Granted(a.freed)
			return a.granted(ctx, czxid)
		}
		a.freed = time.Time{}
		if st.IsWounded() {
			return 0, deadlockErr(h.Owner, k)
		}
		a.woundHolder(ctx, q.ahead[0])
		if !a.traced {
			a.traced = true
			a.readHolder(ctx, q.ahead[0])
		}
		if err := a.wait(ctx, q); err != nil {
			return 0, err
		}
	}
}

// create makes the own ephemeral sequential znode, creating the key's
// container first if it is missing.
func (a *attempt) create(ctx context.Context) error {
	l := a.l
	prefix := nodePrefix(a.h.Owner.Priority(), l.id, l.seq.Add(1))
	l.mu.Lock()
	idx := len(a.h.nodes)
	a.h.nodes = append(a.h.nodes, ownNode{dir: a.dir, prefix: prefix})
	l.mu.Unlock()
	data := newEntry(a.h.Owner, l.id)
	for try := 0; ; try++ {
		p, s, err := tracked(ctx, l, func() (string, error) {
			return l.conn.Create(a.dir+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		})
		if errors.Is(err, zk.ErrNoNode) && try < 3 {
			_, _, err = tracked(ctx, l, func() (string, error) {
				return l.conn.CreateContainer(a.dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			})
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return classify(ctx, a.k, err)
			}
			continue
		}
		if err != nil {
			return classify(ctx, a.k, err)
		}
		l.mu.Lock()
		a.h.nodes[idx].path = p
		l.mu.Unlock()
		if !l.join(a.h, s) {
			return classify(ctx, a.k, errSession)
		}
		n, ok := parseNode(path.Base(p))
		if !ok {
			return fmt.Errorf("zklock: unexpected znode name %q", p)
		}
		a.me = n
		return nil
	}
}

type czxidResult struct {
	v   int64
	err error
}

// statAsync asks for the own znode's czxid (the fence) while the queue is
// read.
func (a *attempt) statAsync(ctx context.Context) <-chan czxidResult {
	ch := make(chan czxidResult, 1)
	p := a.dir + "/" + a.me.name
	go func() {
		st, _, err := tracked(ctx, a.l, func() (*zk.Stat, error) {
			ok, st, err := a.l.conn.Exists(p)
			if err == nil && !ok {
				err = errNodeGone
			}
			return st, err
		})
		if err != nil {
			ch <- czxidResult{err: err}
			return
		}
		ch <- czxidResult{v: st.Czxid}
	}()
	return ch
}

// granted records k as held and returns its fence.
func (a *attempt) granted(ctx context.Context, czxid <-chan czxidResult) (uint64, error) {
	r := <-czxid
	if r.err != nil {
		r = <-a.statAsync(ctx)
	}
	if r.err != nil {
		if errors.Is(r.err, errNodeGone) {
			return 0, fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, a.k.Rule, a.k.Name, r.err)
		}
		return 0, classify(ctx, a.k, r.err)
	}
	a.l.mu.Lock()
	a.h.keys = append(a.h.keys, a.k)
	a.l.mu.Unlock()
	return uint64(r.v), nil
}

// read lists the key's znodes.
func (a *attempt) read(ctx context.Context) (queue, error) {
	names, _, err := tracked(ctx, a.l, func() ([]string, error) {
		c, _, err := a.l.conn.Children(a.dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return queue{}, nil // the container went: so did the own znode
	}
	if err != nil {
		return queue{}, err
	}
	var q queue
	for _, name := range names {
		n, ok := parseNode(name)
		switch {
		case !ok:
		case n.seq < a.me.seq:
			q.ahead = append(q.ahead, n)
		case n.name == a.me.name:
			q.mine = true
		}
	}
	slices.SortFunc(q.ahead, func(x, y node) int { return int(x.seq - y.seq) })
	return q, nil
}

// wait sleeps until the znode just ahead is deleted (or, when a younger
// waiter is ahead, the holder's: it may become a younger holder to wound),
// the owner is wounded, WaitSlice passes, or ctx, the session or the
// Locker ends.
func (a *attempt) wait(ctx context.Context, q queue) error {
	if a.waitDone == nil {
		// ZooKeeper queues every waiter of every instance: the znodes
		// ahead less the holder's, and this one.
		a.waitDone = a.l.ledger.WaitQueued(a.h.Owner, a.k, len(q.ahead))
	}
	a.waitDone.Saw(a.holder, len(q.ahead)) // the holder is ahead too
	predC, err := a.watch(ctx, q.ahead[len(q.ahead)-1])
	if err != nil || predC == nil {
		return err
	}
	var headC <-chan zk.Event
	if len(q.ahead) > 1 && a.youngerWaiterAhead(q) {
		if headC, err = a.watch(ctx, q.ahead[0]); err != nil || headC == nil {
			return err
		}
	}
	t := time.NewTimer(a.l.opt.WaitSlice)
	defer t.Stop()
	select {
	case <-predC:
		a.freed = time.Now()
	case <-headC:
		a.freed = time.Now()
	case <-t.C:
	case <-a.st.Wounded(): // fail only if a re-read shows we must still wait
	case <-ctx.Done():
		return lockmgr.WaitError(ctx, a.k)
	case <-a.l.ctx.Done():
		return lockmgr.ErrClosed
	case <-a.h.sess.Done():
		return fmt.Errorf("%w: rule %q key %q: %w", lockmgr.ErrLeaseLost, a.k.Rule, a.k.Name, errExpired)
	}
	return nil
}

// watch sets a watch on znode n of the key; a nil channel means n is
// already gone (read again).
func (a *attempt) watch(ctx context.Context, n node) (<-chan zk.Event, error) {
	type res struct {
		ok bool
		ch <-chan zk.Event
	}
	r, _, err := tracked(ctx, a.l, func() (res, error) {
		ok, _, ch, err := a.l.conn.ExistsW(a.dir + "/" + n.name)
		return res{ok, ch}, err
	})
	if err != nil {
		return nil, classify(ctx, a.k, err)
	}
	if !r.ok {
		return nil, nil
	}
	return r.ch, nil
}

// youngerWaiterAhead reports whether a waiter (not the holder) ahead may be
// a younger transaction (ages from the znode names).
func (a *attempt) youngerWaiterAhead(q queue) bool {
	for _, n := range q.ahead[1:] {
		if n.prio >= a.me.prio {
			return true
		}
	}
	return false
}

// readHolder reads the owner of znode n (the holder when the wait began)
// for /debug/locks and ctx's wait trace: one read, once per wait.
func (a *attempt) readHolder(ctx context.Context, n node) {
	data, _, err := tracked(ctx, a.l, func() ([]byte, error) {
		d, _, err := a.l.conn.Get(a.dir + "/" + n.name)
		return d, err
	})
	if err != nil {
		return // gone already: it no longer matters who it was
	}
	if e, err := parseEntry(data); err == nil {
		a.holder = e.Owner
		lockmgr.TraceHolder(ctx, e.Owner)
	}
}
