package memlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// forever is the validity of a memory lease: it never expires on its own.
const forever = 100 * 365 * 24 * time.Hour

// slowWait: a wait at least this long is logged with rule, key, waiter and
// holder.
const slowWait = time.Second

// Locker is a lockmgr.Locker whose locks live in this process. Safe for
// concurrent use.
type Locker struct {
	t      *table
	log    *zap.Logger
	ledger *lockmgr.Ledger
	once   sync.Once
	closed chan struct{}
}

var _ lockmgr.Locker = (*Locker)(nil)

// New makes a Locker with its own lock table. log gets a warning that the
// locks are not distributed; m (may be nil) records metrics.
func New(log *zap.Logger, m *lockmgr.Metrics) *Locker {
	if log == nil {
		log = zap.NewNop()
	} else {
		log.Warn("lock backend is memory: locks are held in this process only and are NOT shared with other lockproxy instances; run one instance or use a distributed backend")
	}
	return &Locker{t: newTable(), log: log, ledger: lockmgr.NewLedger(m), closed: make(chan struct{})}
}

// Share returns another Locker on the same lock table, with its own
// Snapshot and Close, as a second proxy instance would be if the table were
// distributed. Tests use it.
func (l *Locker) Share() *Locker {
	return &Locker{t: l.t, log: l.log, ledger: lockmgr.NewLedger(l.ledger.Metrics()), closed: make(chan struct{})}
}

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (lease *lockmgr.Lease, err error) {
	start := time.Now()
	defer func() { l.ledger.Metrics().ObserveAcquire(keys, start, err) }()
	select {
	case <-l.closed:
		return nil, lockmgr.ErrClosed
	default:
	}
	keys, err = lockmgr.NormalizeKeys(keys)
	if err != nil {
		return nil, err
	}
	fences := make([]uint64, 0, len(keys))
	for _, k := range keys {
		f, err := l.acquireKey(ctx, owner, k)
		if err != nil {
			l.release(owner, keys[:len(fences)])
			return nil, err
		}
		fences = append(fences, f)
	}
	lease, _ = lockmgr.NewLease(lockmgr.LeaseSpec{
		Owner: owner, Keys: keys, Fences: fences,
		ValidUntil: time.Now().Add(forever),
		Release: func(context.Context) error {
			l.release(owner, keys)
			return nil
		},
		// A release here never waits for anything: the caller may make
		// it on its own goroutine (Lease.ReleaseLocal) instead of in
		// the background.
		HandOff: func() bool {
			l.release(owner, keys)
			return true
		},
		Ledger: l.ledger,
	})
	return lease, nil
}

func (l *Locker) acquireKey(ctx context.Context, o lockmgr.Owner, k lockmgr.Key) (uint64, error) {
	l.t.mu.Lock()
	fence, w, err := l.t.tryLocked(o, k.Name)
	l.t.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("%w: owner %s wounded by an older transaction, rule %q key %q", err, o, k.Rule, k.Name)
	}
	if w == nil {
		return fence, nil
	}
	waiting := l.ledger.Wait(o, k)
	defer waiting.End()
	start, holder := time.Now(), l.holder(k.Name)
	waiting.Saw(holder, 0)
	waiting.Live(func() (string, int) { return l.holder(k.Name), l.position(w, k.Name) })
	lockmgr.TraceHolder(ctx, holder)
	defer func() {
		if waited := time.Since(start); waited >= slowWait {
			l.log.Info("slow lock wait", zap.String("rule", k.Rule), zap.String("key", k.Name),
				zap.String("waiter", o.ID()), zap.String("holder", holder), zap.Duration("waited", waited))
		}
	}()
	for {
		select {
		case <-w.signal:
		case <-ctx.Done():
		case <-l.closed:
		}
		l.t.mu.Lock()
		switch {
		case w.granted && ctx.Err() == nil:
			l.t.owner(o).waiting = nil
			freed := w.freed
			l.t.mu.Unlock()
			waiting.Granted(freed)
			return w.fence, nil
		case w.err != nil:
			l.t.leaveLocked(w, k.Name)
			l.t.mu.Unlock()
			return 0, fmt.Errorf("%w: owner %s wounded by an older transaction while waiting for rule %q key %q", w.err, o, k.Rule, k.Name)
		case ctx.Err() != nil:
			l.t.leaveLocked(w, k.Name)
			l.t.mu.Unlock()
			return 0, lockmgr.WaitError(ctx, k)
		case l.isClosed():
			l.t.leaveLocked(w, k.Name)
			l.t.mu.Unlock()
			return 0, lockmgr.ErrClosed
		}
		l.t.mu.Unlock()
	}
}

// holder names the owner holding key now ("" if none).
func (l *Locker) holder(key string) string {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	if ks := l.t.keys[key]; ks != nil {
		return ks.holder.ID()
	}
	return ""
}

func (l *Locker) release(o lockmgr.Owner, keys []lockmgr.Key) {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	for _, k := range keys {
		l.t.releaseLocked(o, k.Name)
	}
}

func (l *Locker) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// Snapshot implements lockmgr.Locker.
func (l *Locker) Snapshot() []lockmgr.Entry { return l.ledger.Snapshot() }

// Close implements lockmgr.Locker: it releases this handle's leases and
// fails its waits. Idempotent.
func (l *Locker) Close() error {
	first := false
	l.once.Do(func() { close(l.closed); first = true })
	if !first {
		return nil
	}
	for _, lease := range l.ledger.Held() {
		_ = lease.Release(context.Background())
	}
	return nil
}

// position is w's place in key's queue (1: next), 0 if not queued.
func (l *Locker) position(w *waiter, key string) int {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	if ks := l.t.keys[key]; ks != nil {
		return slices.Index(ks.queue, w) + 1
	}
	return 0
}
