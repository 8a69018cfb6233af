package redislock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Options configure a Locker. The zero value (or nil) works.
type Options struct {
	// TTL is the lease: how long a lock outlives its holder's last
	// renewal. Default 30s.
	TTL time.Duration
	// Prefix starts every Redis key and channel. Default "lockproxy".
	Prefix string
	// OpTimeout bounds each Redis call made without a caller's deadline
	// (an acquire's calls are bounded by its wait alone). Default 1s.
	OpTimeout time.Duration
	// WaitSlice is the longest a waiter sleeps between tries (a lost
	// wake-up costs at most this much). Default 500ms.
	WaitSlice time.Duration
	// FenceTTL is how long an unused key's fence counter is kept. Fences
	// still only grow after it expires (they are seeded from server time).
	// Default 24h.
	FenceTTL time.Duration
	// RestartGrace is how long after a Redis server (re)start grants are
	// held back, so that holders whose locks the server forgot can restore
	// them (at their next renewal) or see their leases run out first.
	// Default TTL. Negative: no hold-back; only for a server that persists
	// every write before answering (appendfsync always) or for tests
	// against a server started moments ago.
	RestartGrace time.Duration
	// SlowWait: a wait at least this long is logged (Info) with rule, key,
	// waiter and holder. Default 1s.
	SlowWait time.Duration
	// Logger gets warnings (renewal failures, lost leases). Default no-op.
	Logger *zap.Logger
	// Metrics, if not nil, records the lock metrics.
	Metrics *lockmgr.Metrics
	// LocalHandoffs is how many times in a row a lease on one key may pass
	// from a releasing owner to the next waiter of this Locker without a
	// round trip to Redis (lock cohorting), among the waiters queued when
	// Redis granted it; the release after that goes back to Redis, where
	// other instances' waiters are queued by age.
	// Only single-key Acquires take part, and never for a key marked
	// lockmgr.Key.NoHandoff. 0 (the default): every release goes to Redis.
	LocalHandoffs int
	// LocalHandoffWindow, when positive, also ends the hand-offs of a key
	// once that long has passed since Redis granted it to this Locker, so
	// long holds do not keep other instances waiting for LocalHandoffs of
	// them. 0: only LocalHandoffs bounds them.
	LocalHandoffWindow time.Duration
	// ReleaseWindow, when positive, lets the release of a lease whose
	// keys were all free when asked for, and never passed between owners,
	// wait up to that long for this Locker's next acquire and go to Redis
	// in the same pipeline (one write and one read for both), or on its
	// own when the window is over. Release returns at once; every later
	// acquire or observe of this Locker reaches Redis after it, and a local owner
	// waiting for one of its keys sends it at once. An owner of another
	// instance that asks for such a key meanwhile waits up to that much
	// longer. 0 (the default): releases are sent when made.
	ReleaseWindow time.Duration
	// MinReplicasAck, when positive, makes every grant wait (WAIT) until
	// that many replicas of the master holding the key have it, so a
	// failover to one of them does not forget it; a grant not
	// acknowledged within WaitSlice is given back and asked for again
	// until the acquire's wait ends. Renewals are not waited for. 0
	// (the default): no wait.
	MinReplicasAck int
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	leasebook.Defaults(&v.TTL, &v.OpTimeout, &v.Logger)
	if v.Prefix == "" {
		v.Prefix = "lockproxy"
	}
	if v.WaitSlice <= 0 {
		v.WaitSlice = 500 * time.Millisecond
	}
	if v.FenceTTL <= 0 {
		v.FenceTTL = 24 * time.Hour
	}
	if v.RestartGrace == 0 {
		v.RestartGrace = v.TTL
	}
	if v.SlowWait <= 0 {
		v.SlowWait = time.Second
	}
	return v
}

// Locker is the Redis lockmgr.Locker. Safe for concurrent use. The
// redis client stays the caller's: Close does not close it.
type Locker struct {
	rdb      redis.UniversalClient
	opt      Options
	id       string // unique per Locker: in tokens and the wound channel
	wound    string // the wound channel (woundChannel), named once
	sc       scripts
	ledger   *lockmgr.Ledger
	notify   *notifier
	restart  restartGuard
	evict    evictGuard
	batch    batcher // releases of all sessions, pipelined
	acquires batcher // the fast path's acquires of all sessions, pipelined
	// relArgs are the release script's arguments that depend only on
	// the options (releaseQueue), boxed once rather than per release.
	relArgs struct{ lease, fenceTTL, ticketTTL any }

	seq     atomic.Uint64
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopper leasebook.Stopper
	// tasks are short background calls (spawn) that stop waits for;
	// tasksDone is set once it has begun to, after which none starts.
	tasksMu   sync.Mutex
	tasks     sync.WaitGroup
	tasksDone bool

	book *leasebook.Book // wait queues, wound-wait state, leases
}

var _ lockmgr.Locker = (*Locker)(nil)

// New makes a Locker on rdb. It adds a hook to rdb (to notice reconnects
// after a server restart; on a Cluster client also to reload the slot map
// when a node is away), preloads the scripts and subscribes to its wound
// channel, but does not fail when Redis is down: Acquire reports
// lockmgr.ErrUnavailable until it is back.
func New(rdb redis.UniversalClient, o *Options) *Locker {
	opt := o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{
		rdb: rdb, opt: opt, id: leasebook.NewID(), sc: newScripts(),
		ledger: lockmgr.NewLedger(opt.Metrics), ctx: ctx, cancel: cancel,
		book: leasebook.New(opt.Logger),
	}
	l.wound = opt.Prefix + ":locker:" + l.id
	l.relArgs.lease = strconv.FormatInt(l.grantLease().Milliseconds(), 10)
	l.relArgs.fenceTTL, l.relArgs.ticketTTL = opt.FenceTTL.Milliseconds(), l.ticketTTL().Milliseconds()
	l.batch.l = l
	l.acquires.l, l.acquires.carry = l, &l.batch
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		l.followCluster(cc)
	} else {
		rdb.AddHook(&l.restart)
	}
	l.notify = newNotifier(l)
	l.wg.Add(2)
	go l.renewLoop()
	go func() { // warm-up in the background: New never waits for Redis
		defer l.wg.Done()
		lctx, lcancel := l.opCtx(ctx)
		defer lcancel()
		_ = l.sc.load(lctx, rdb)
		_ = l.notify.ps.Subscribe(lctx, l.woundChannel(), l.schemaChannel())
	}()
	return l
}

// schemaChannel is where the Lockers sharing a prefix announce schema
// changes; the payload is the announcer's id.
func (l *Locker) schemaChannel() string { return l.opt.Prefix + ":schema" }

// AnnounceSchemaChange implements lockmgr.SchemaAnnouncer.
func (l *Locker) AnnounceSchemaChange(ctx context.Context) error {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	return l.rdb.Publish(ctx, l.schemaChannel(), l.id).Err()
}

// SchemaChanges implements lockmgr.SchemaAnnouncer.
func (l *Locker) SchemaChanges() <-chan struct{} { return l.notify.schema }

// woundChannel is where other Lockers tell this one that a lease token of
// its was wounded.
func (l *Locker) woundChannel() string { return l.wound }

// Snapshot implements lockmgr.Locker. Besides the ledger's held and
// waiting keys it lists, as "releasing", the keys of releases Redis does
// not have yet (held for a ride by Options.ReleaseWindow, or on their
// way): until then the key is still taken there.
func (l *Locker) Snapshot() []lockmgr.Entry {
	out := l.ledger.Snapshot()
	rels := l.book.Releases()
	for _, r := range rels {
		for _, k := range r.Keys {
			out = append(out, lockmgr.Entry{Key: k.Name, Rule: k.Rule, Owner: r.Owner.ID(),
				Session: r.Owner.Session, State: "releasing", Since: r.Since})
		}
	}
	if len(rels) > 0 {
		slices.SortFunc(out, lockmgr.CompareEntries)
	}
	return out
}

// Close implements lockmgr.Locker: it fails waits, releases every held
// lease (bounded by OpTimeout each) and stops renewal and Pub/Sub. It is
// idempotent.
func (l *Locker) Close() error {
	l.stop(true)
	return nil
}

// Abandon stops the Locker as if its process died: no renewals, no
// releases; its locks expire with their leases. For tests.
func (l *Locker) Abandon() { l.stop(false) }

func (l *Locker) stop(release bool) {
	l.stopper.Stop(release, l.ledger, l.freshCtx, func(bool) {
		if release {
			l.batch.unhold()
		} else {
			l.batch.drop(lockmgr.ErrClosed)
		}
		l.cancel()
		l.notify.close()
		l.wg.Wait()
		l.tasksMu.Lock()
		l.tasksDone = true
		l.tasksMu.Unlock()
		l.tasks.Wait()
		// Nothing renews any more: whatever is still held is lost.
		for _, h := range l.book.All() {
			l.book.Lose(h, lockmgr.ErrClosed)
		}
	})
}

func (l *Locker) closed() bool { return l.ctx.Err() != nil }

// spawn runs f on a goroutine of its own that Close waits for, unless the
// Locker is stopping (then f does not run).
func (l *Locker) spawn(f func()) {
	l.tasksMu.Lock()
	defer l.tasksMu.Unlock()
	if l.tasksDone {
		return
	}
	l.tasks.Add(1)
	go func() {
		defer l.tasks.Done()
		f()
	}()
}

// token is a fresh lease token: owner id, NUL, Locker id and a sequence.
// The owner id comes first so the wait queue orders equal ages by owner.
func (l *Locker) token(o lockmgr.Owner) string {
	return o.ID() + "\x00" + l.id + ":" + itoa(l.seq.Add(1))
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// opCtx bounds one Redis call: by ctx's deadline, or OpTimeout without one
// (see leasebook.CallCtx).
func (l *Locker) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return leasebook.CallCtx(ctx, l.opt.OpTimeout)
}

// batchCtx is opCtx for a call that only waits in a batcher (do): a ctx
// with a deadline bounds it as it is, with no child context (and timer)
// made and cancelled for each statement. Nothing outlives the call on
// it but the batch's own, which has a context of its own (flush).
func (l *Locker) batchCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.opt.OpTimeout)
}

// freshCtx is for cleanup: bounded, independent of the caller's dead ctx.
func (l *Locker) freshCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.opt.OpTimeout)
}
