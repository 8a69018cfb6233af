package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
	"github.com/lockproxy/lockproxy/lockmgr/internal/pollwait"
)

// ErrTooFewServers: Redlock needs at least three independent servers.
var ErrTooFewServers = errors.New("redlock: at least 3 independent Redis servers are needed")

// Options configure a Locker. The zero value (or nil) works.
type Options struct {
	// TTL is the lease. Default 30s.
	TTL time.Duration
	// Prefix starts every Redis key. Default "lockproxy".
	Prefix string
	// OpTimeout bounds each round of calls to the servers. Default 1s.
	OpTimeout time.Duration
	// MinPoll and MaxPoll bound the backoff of a waiting Acquire.
	// Defaults 2ms and 100ms.
	MinPoll, MaxPoll time.Duration
	// FenceTTL is how long an unused key's fence counter is kept (fences
	// still grow after it expires: they are seeded from server time).
	// Default 24h.
	FenceTTL time.Duration
	// SlowWait: a wait at least this long is logged. Default 1s.
	SlowWait time.Duration
	// Logger gets warnings. Default no-op.
	Logger *zap.Logger
	// Metrics, if not nil, records the lock metrics.
	Metrics *lockmgr.Metrics
	// TLS, if not nil, is how Dial connects to every server (its server
	// name, when empty, is each address's host).
	TLS *tls.Config
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	leasebook.Defaults(&v.TTL, &v.OpTimeout, nil)
	if v.Prefix == "" {
		v.Prefix = "lockproxy"
	}
	if v.FenceTTL <= 0 {
		v.FenceTTL = 24 * time.Hour
	}
	return v
}

// Locker is the Redlock lockmgr.Locker. Safe for concurrent use.
type Locker struct {
	e     *pollwait.Engine
	st    *store
	owned []redis.UniversalClient // closed by Close when Dial made them
}

var _ lockmgr.Locker = (*Locker)(nil)

// New makes a Locker on clients, one per independent server (at least 3;
// an odd number is best). The clients stay the caller's.
func New(clients []redis.UniversalClient, o *Options) (*Locker, error) {
	if len(clients) < 3 {
		return nil, fmt.Errorf("%w (got %d)", ErrTooFewServers, len(clients))
	}
	opt := o.withDefaults()
	cfg := pollwait.Config{
		Name: "redlock", TTL: opt.TTL, OpTimeout: opt.OpTimeout,
		MinPoll: opt.MinPoll, MaxPoll: opt.MaxPoll, SlowWait: opt.SlowWait,
		Logger: opt.Logger, Metrics: opt.Metrics,
	}
	st := newStore(clients, opt, cfg.TicketTTL())
	return &Locker{e: pollwait.New(st, cfg), st: st}, nil
}

// Dial makes a Locker with one client per address (ClientOptions plus
// username and password, which may be empty); Close closes them.
func Dial(addrs []string, username, password string, o *Options) (*Locker, error) {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		co := ClientOptions(a)
		co.Username, co.Password = username, password
		if o != nil {
			co.TLSConfig = o.TLS
		}
		clients[i] = redis.NewClient(co)
	}
	l, err := New(clients, o)
	if err != nil {
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, err
	}
	l.owned = clients
	return l, nil
}

// ClientOptions returns go-redis options for one Redlock server with
// bounded dial, read, write and pool timeouts and no retries (a slow
// server simply does not vote); plain connections are read and written
// through rawsock, as redislock's are.
func ClientOptions(addr string) *redis.Options {
	co := &redis.Options{
		Addr:                  addr,
		DialTimeout:           500 * time.Millisecond,
		DialerRetries:         1,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		PoolTimeout:           500 * time.Millisecond,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	}
	co.Dialer = rawsock.DialFunc(&net.Dialer{Timeout: co.DialTimeout, KeepAliveConfig: rawsock.KeepAlive},
		func() *tls.Config { return co.TLSConfig })
	return co
}

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return l.e.Acquire(ctx, owner, keys)
}

// Snapshot implements lockmgr.Locker.
func (l *Locker) Snapshot() []lockmgr.Entry { return l.e.Snapshot() }

// Close implements lockmgr.Locker: it releases every held lease (bounded),
// stops renewal and closes the clients Dial made. Idempotent.
func (l *Locker) Close() error {
	_ = l.e.Close()
	var errs []error
	for _, c := range l.owned {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Abandon stops the Locker as if its process died: no renewals, no
// releases; its locks expire with their leases. For tests.
func (l *Locker) Abandon() { l.e.Abandon() }

// Ping reports whether a majority of the servers answer (for readiness
// checks), as an error wrapping lockmgr.ErrUnavailable if not.
func (l *Locker) Ping(ctx context.Context) error {
	errs := l.st.each(func(_ int, c redis.UniversalClient) error { return c.Ping(ctx).Err() })
	return l.st.enough("ping", errs)
}
