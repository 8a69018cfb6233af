package etcdlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
	"github.com/lockproxy/lockproxy/lockmgr/internal/schemaword"
)

// Options configure a Locker. The zero value (or nil) works.
type Options struct {
	// TTL is the session lease: how long locks outlive the last successful
	// keep-alive. etcd counts it in whole seconds (rounded up) and may
	// raise it to its minimum (about 2s). Default 30s.
	TTL time.Duration
	// Prefix starts every etcd key. Default "lockproxy".
	Prefix string
	// OpTimeout bounds each etcd call made without a caller's deadline
	// (an acquire's calls are bounded by its wait alone). Default 1s.
	OpTimeout time.Duration
	// WaitSlice is the longest a waiter waits between re-reads of its
	// key's queue (a lost watch event costs at most this much). Default 1s.
	WaitSlice time.Duration
	// Logger gets warnings (keep-alive failures, lost leases). Default no-op.
	Logger *zap.Logger
	// Metrics, if not nil, records the lock metrics.
	Metrics *lockmgr.Metrics
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
		v.WaitSlice = time.Second
	}
	return v
}

// ClientConfig is the etcd client configuration lockproxy uses for
// endpoints: a short dial timeout, keep-alive pings so a dead connection is
// noticed, and a silent gRPC logger.
func ClientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	}
}

// Locker is the etcd lockmgr.Locker. Safe for concurrent use. The client
// stays the caller's: Close does not close it.
type Locker struct {
	cli    *clientv3.Client
	opt    Options
	id     string // unique per Locker: in entries and its wound prefix
	ledger *lockmgr.Ledger
	schema *schemaword.Follower // the other Lockers' schema announcements

	seq     atomic.Uint64
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopper leasebook.Stopper

	sessMu sync.Mutex // serialises session grants

	mu     sync.Mutex
	sess   *session         // current session, nil until granted or after loss
	owners leasebook.Owners // wound-wait state by owner id
}

var _ lockmgr.Locker = (*Locker)(nil)

// held is a lease being acquired or held. Fields other than Owner and
// sess are guarded by Locker.mu.
type held struct {
	leasebook.Member
	sess  *session
	keys  []lockmgr.Key // granted so far
	paths []string      // own etcd entries, granted or not yet deleted
}

// New makes a Locker on cli and starts watching its wound prefix and the
// schema key (lockmgr.SchemaAnnouncer). It does not talk to etcd
// otherwise: the session lease is granted by the first Acquire, which
// reports lockmgr.ErrUnavailable while etcd is down.
func New(cli *clientv3.Client, o *Options) *Locker {
	opt := o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{cli: cli, opt: opt, id: leasebook.NewID(), ledger: lockmgr.NewLedger(opt.Metrics),
		ctx: ctx, cancel: cancel, owners: leasebook.NewOwners()}
	l.schema = schemaword.New(l.id)
	l.wg.Add(2)
	go l.watchWounds()
	go l.followSchema()
	return l
}

// Snapshot implements lockmgr.Locker.
func (l *Locker) Snapshot() []lockmgr.Entry { return l.ledger.Snapshot() }

// Close implements lockmgr.Locker: it releases every held lease (bounded
// by OpTimeout each) and stops the keep-alive and watch; waits fail with
// lockmgr.ErrClosed and delete their entries. The session lease is not
// revoked but left to expire with its ttl: waiters elsewhere that saw
// entries of a revoked lease vanish would wait out a ttl (see the package
// doc), while an unused lease costs nothing. It is idempotent.
func (l *Locker) Close() error {
	l.stop(true)
	return nil
}

// Abandon stops the Locker as if its process died: no keep-alives, no
// releases; its locks go when its session lease expires. For tests.
func (l *Locker) Abandon() { l.stop(false) }

func (l *Locker) stop(release bool) {
	l.stopper.Stop(release, l.ledger, l.freshCtx, func(bool) {
		l.mu.Lock() // with session(): no keep-alive starts after this
		l.cancel()
		s := l.sess
		l.mu.Unlock()
		l.wg.Wait()
		if s != nil {
			l.loseSession(s, lockmgr.ErrClosed)
		}
	})
}

func (l *Locker) closed() bool { return l.ctx.Err() != nil }

// opCtx bounds one etcd call: by ctx's deadline (see leasebook.CallCtx),
// or OpTimeout without one. A call bounded by its caller is cut short
// (with errAway as the cause) once the client's connection to etcd fails,
// as the client's own retries would otherwise wait out the caller's
// deadline against an etcd that is not there; a slow etcd that answers is
// waited for.
func (l *Locker) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); !ok {
		return context.WithTimeout(ctx, l.opt.OpTimeout)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	cc := l.cli.ActiveConnection()
	if cc == nil {
		return cctx, func() { cancel(nil) }
	}
	go func() {
		for st := cc.GetState(); ; st = cc.GetState() {
			if st == connectivity.TransientFailure || st == connectivity.Shutdown {
				cancel(errAway)
				return
			}
			if !cc.WaitForStateChange(cctx, st) {
				return
			}
		}
	}()
	return cctx, func() { cancel(nil) }
}

// freshCtx is for cleanup: bounded, independent of the caller's dead ctx.
func (l *Locker) freshCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.opt.OpTimeout)
}
