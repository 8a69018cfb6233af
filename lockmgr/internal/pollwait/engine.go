package pollwait

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// Config configures an Engine. Zero fields take the defaults shown.
type Config struct {
	// Name prefixes the engine's own errors ("mysqllock", "redlock").
	Name string
	// TTL is the lease the Store grants. Default 30s.
	TTL time.Duration
	// OpTimeout bounds each Store call. Default 1s.
	OpTimeout time.Duration
	// CallerBound: a Store call made for a caller with a deadline (an
	// acquire's wait) is bounded by that deadline alone, not OpTimeout
	// too (see leasebook.CallCtx). Off for Redlock, where one slow server
	// must not hold up a round the others answered.
	CallerBound bool
	// MinPoll and MaxPoll bound the jittered backoff between tries of a
	// waiting head. Defaults 2ms and 100ms.
	MinPoll, MaxPoll time.Duration
	// SlowWait: a wait at least this long is logged (Info). Default 1s.
	SlowWait time.Duration
	// Logger gets warnings. Default no-op.
	Logger *zap.Logger
	// Metrics, if not nil, records the lock metrics.
	Metrics *lockmgr.Metrics
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "pollwait"
	}
	leasebook.Defaults(&c.TTL, &c.OpTimeout, &c.Logger)
	if c.MinPoll <= 0 {
		c.MinPoll = 2 * time.Millisecond
	}
	if c.MaxPoll <= 0 {
		c.MaxPoll = 100 * time.Millisecond
	}
	if c.MaxPoll < c.MinPoll {
		c.MaxPoll = c.MinPoll
	}
	if c.SlowWait <= 0 {
		c.SlowWait = time.Second
	}
	return c
}

// TicketTTL is how long a waiter's ticket outlives its last try: a head
// tries at least every MaxPoll, so a ticket only expires when its waiter
// is gone.
func (c Config) TicketTTL() time.Duration {
	c = c.withDefaults()
	return 2*time.Second + 10*c.MaxPoll + 2*c.OpTimeout
}

// Validity is how long after sending a grant or renewal the lock is known
// held on this process's monotonic clock: the ttl less a drift margin of
// 1% of the ttl plus 2ms.
func Validity(ttl time.Duration) time.Duration { return leasebook.Validity(ttl) }

// Engine implements lockmgr.Locker on a Store. Safe for concurrent use.
type Engine struct {
	st     Store
	cfg    Config
	id     string
	ledger *lockmgr.Ledger
	book   *leasebook.Book // wait queues, wound-wait state, leases
	seq    atomic.Uint64

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New starts an Engine on st: its renewal goroutine runs until Close.
func New(st Store, cfg Config) *Engine {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		st: st, cfg: cfg, id: leasebook.NewID(), ledger: lockmgr.NewLedger(cfg.Metrics),
		book: leasebook.New(cfg.Logger), ctx: ctx, cancel: cancel,
	}
	e.wg.Add(1)
	go e.renewLoop()
	return e
}

// Snapshot implements lockmgr.Locker.
func (e *Engine) Snapshot() []lockmgr.Entry { return e.ledger.Snapshot() }

// Close releases every held lease (bounded by OpTimeout each), fails
// waits with lockmgr.ErrClosed and stops renewal. Idempotent.
func (e *Engine) Close() error {
	e.stop(true)
	return nil
}

// Abandon stops the Engine as if its process died: no renewals, no
// releases; its locks expire with their leases. For tests.
func (e *Engine) Abandon() { e.stop(false) }

func (e *Engine) stop(release bool) {
	e.once.Do(func() {
		if release {
			leasebook.ReleaseHeld(e.ledger, e.freshCtx)
		}
		e.cancel()
		e.wg.Wait()
		for _, h := range e.book.All() {
			e.book.Lose(h, lockmgr.ErrClosed)
		}
	})
}

func (e *Engine) closed() bool { return e.ctx.Err() != nil }

// Closed reports whether Close or Abandon was called.
func (e *Engine) Closed() bool { return e.closed() }

// token is a fresh holder token: owner id, NUL, engine id and a sequence.
// The owner id comes first, so byte order of tokens follows owner ids.
func (e *Engine) token(o lockmgr.Owner) string {
	return o.ID() + "\x00" + e.id + ":" + strconv.FormatUint(e.seq.Add(1), 10)
}

func (e *Engine) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.cfg.CallerBound {
		return leasebook.CallCtx(ctx, e.cfg.OpTimeout)
	}
	return context.WithTimeout(ctx, e.cfg.OpTimeout)
}

// renewCtx bounds a renewal of rs: for a CallerBound Store by the leases
// it renews (leasebook.RenewCtx), else by OpTimeout (a quorum's round,
// whose time is taken off the validity it grants).
func (e *Engine) renewCtx(rs []leasebook.Renewal) (context.Context, context.CancelFunc) {
	if e.cfg.CallerBound {
		return leasebook.RenewCtx(e.ctx, rs, e.cfg.OpTimeout)
	}
	return context.WithTimeout(e.ctx, e.cfg.OpTimeout)
}

func (e *Engine) freshCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.cfg.OpTimeout)
}

func keyNames(keys []lockmgr.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	return out
}
