package zklock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
	"github.com/lockproxy/lockproxy/lockmgr/internal/schemaword"
)

// Options configure a Locker. The zero value (or nil) works.
type Options struct {
	// TTL is the ZooKeeper session timeout asked for: how long locks outlive
	// the last request the server heard. The server may lower it to its
	// maxSessionTimeout (then validity uses that) or raise it to its
	// minSessionTimeout. Default 30s.
	TTL time.Duration
	// Root is the parent znode of everything the Locker creates. Default
	// "/lockproxy".
	Root string
	// OpTimeout bounds each ZooKeeper request made without a caller's
	// deadline (an acquire's are bounded by its wait alone). Default 1s.
	OpTimeout time.Duration
	// WaitSlice is the longest a waiter waits between re-reads of its
	// key's queue. Default 1s.
	WaitSlice time.Duration
	// Logger gets warnings (lost leases) and the client's own log (Debug).
	// Default no-op.
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
	if v.Root == "" {
		v.Root = "/lockproxy"
	}
	v.Root = "/" + strings.Trim(v.Root, "/")
	if v.WaitSlice <= 0 {
		v.WaitSlice = time.Second
	}
	return v
}

// Locker is the ZooKeeper lockmgr.Locker. Safe for concurrent use. It owns
// its connection: Close closes it, which ends the session.
type Locker struct {
	conn   *zk.Conn
	opt    Options
	id     string // unique per Locker: in znode names and its wound directory
	ledger *lockmgr.Ledger
	schema *schemaword.Follower // the other Lockers' schema announcements

	negotiated atomic.Int64 // session timeout the server granted, ms; 0 unknown
	seq        atomic.Uint64
	ctx        context.Context // ends at Close
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	stopper    leasebook.Stopper

	netMu   sync.Mutex
	cut     bool // Abandon: no more connections
	netConn map[net.Conn]struct{}

	logMu  sync.RWMutex
	logOff bool // set at Close: the client's goroutines outlive Close

	setupMu sync.Mutex
	setup   bool          // Root, locks, wound and the own wound directory exist
	setupC  chan struct{} // closed when setup becomes true

	notes notes // observe mode's notes this Locker made (observe.go)

	mu     sync.Mutex
	sess   *session         // current session, nil until used or after loss
	owners leasebook.Owners // wound-wait state by owner id
}

var _ lockmgr.Locker = (*Locker)(nil)

// held is a lease being acquired or held. Fields other than Owner are
// guarded by Locker.mu.
type held struct {
	leasebook.Member
	sess  *session
	keys  []lockmgr.Key
	nodes []ownNode // own znodes, granted or not yet deleted
}

// ownNode is an own lock znode: its full path once the create answered,
// else its directory and unique name prefix.
type ownNode struct {
	dir, prefix, path string
}

// New makes a Locker connected to servers ("host:port") and starts
// following the schema znode (lockmgr.SchemaAnnouncer). It does not wait
// for ZooKeeper: Acquire reports lockmgr.ErrUnavailable while it is down.
func New(servers []string, o *Options) (*Locker, error) {
	opt := o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{opt: opt, id: leasebook.NewID(), ledger: lockmgr.NewLedger(opt.Metrics),
		ctx: ctx, cancel: cancel, netConn: map[net.Conn]struct{}{}, owners: leasebook.NewOwners(),
		setupC: make(chan struct{})}
	conn, _, err := zk.Connect(servers, opt.TTL, zk.WithLogger(zkLogger{l}), zk.WithDialer(l.dial),
		zk.WithEventCallback(l.onEvent))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	l.conn = conn
	l.schema = schemaword.New(l.id)
	l.wg.Add(3)
	go l.heartbeat()
	go l.watchWounds()
	go l.followSchema()
	return l, nil
}

// Snapshot implements lockmgr.Locker.
func (l *Locker) Snapshot() []lockmgr.Entry { return l.ledger.Snapshot() }

// Close implements lockmgr.Locker: it releases every held lease (bounded by
// OpTimeout each), removes its wound directory and closes the connection,
// which ends the session (the server deletes whatever znodes are left).
// Waits fail with lockmgr.ErrClosed. It is idempotent.
func (l *Locker) Close() error {
	l.stop(true)
	return nil
}

// Abandon stops the Locker as if its process died: connections are cut
// without closing the session, so its znodes stay until the server expires
// the session. For tests.
func (l *Locker) Abandon() { l.stop(false) }

func (l *Locker) stop(release bool) {
	l.stopper.Stop(release, l.ledger, l.freshCtx, func(release bool) {
		if release {
			ctx, cancel := l.freshCtx()
			_, _ = call(ctx, l, func() (struct{}, error) { return struct{}{}, l.conn.Delete(l.woundDir(l.id), -1) })
			cancel()
		} else {
			l.cutNetwork()
		}
		l.mu.Lock()
		l.cancel()
		s := l.sess
		l.mu.Unlock()
		l.conn.Close()
		l.logMu.Lock()
		l.logOff = true
		l.logMu.Unlock()
		l.wg.Wait()
		if s != nil {
			l.loseSession(s, lockmgr.ErrClosed)
		}
	})
}

func (l *Locker) closed() bool { return l.ctx.Err() != nil }

// dial is the client's dialer; it keeps the connections so Abandon can cut
// them.
func (l *Locker) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	l.netMu.Lock()
	cut := l.cut
	l.netMu.Unlock()
	if cut {
		return nil, fmt.Errorf("zklock: locker abandoned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	l.netMu.Lock()
	defer l.netMu.Unlock()
	if l.cut {
		c.Close()
		return nil, fmt.Errorf("zklock: locker abandoned")
	}
	l.netConn[c] = struct{}{}
	return trackedConn{c, l}, nil
}

func (l *Locker) cutNetwork() {
	l.netMu.Lock()
	defer l.netMu.Unlock()
	l.cut = true
	for c := range l.netConn {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l *Locker
}

func (c trackedConn) Close() error {
	c.l.netMu.Lock()
	delete(c.l.netConn, c.Conn)
	c.l.netMu.Unlock()
	return c.Conn.Close()
}

// zkLogger sends the client's log to Debug and notes the session timeout
// the server negotiated.
type zkLogger struct{ l *Locker }

func (z zkLogger) Printf(format string, args ...interface{}) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			z.l.negotiated.Store(int64(ms))
		}
	}
	z.l.logMu.RLock()
	defer z.l.logMu.RUnlock()
	if !z.l.logOff {
		z.l.opt.Logger.Debug(fmt.Sprintf(format, args...))
	}
}

// opCtx bounds one ZooKeeper call: by ctx's deadline, or OpTimeout without one
// (see leasebook.CallCtx).
func (l *Locker) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return leasebook.CallCtx(ctx, l.opt.OpTimeout)
}

// freshCtx is for cleanup: bounded, independent of the caller's dead ctx.
func (l *Locker) freshCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.opt.OpTimeout)
}

// call runs f, a ZooKeeper request, bounded by ctx and OpTimeout. A call
// still running when the bound passes goes on in the background; its result
// is dropped.
func call[T any](ctx context.Context, l *Locker, f func() (T, error)) (T, error) {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Ping reads the root znode, bounded by ctx and OpTimeout: nil when
// ZooKeeper answers, else an error wrapping lockmgr.ErrUnavailable. For
// health checks; safe for concurrent use.
func (l *Locker) Ping(ctx context.Context) error {
	_, err := call(ctx, l, func() (bool, error) {
		ok, _, err := l.conn.Exists("/")
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("%w: zookeeper ping: %w", lockmgr.ErrUnavailable, err)
	}
	return nil
}
