package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
	"github.com/lockproxy/lockproxy/lockmgr/internal/pollwait"
)

// DefaultTable and DefaultDatabase name the lock table when Config leaves
// them empty.
const (
	DefaultTable    = "lockproxy_locks"
	DefaultDatabase = "lockproxy"
)

// Config says where the lock table lives (rules.yaml locks.mysql).
type Config struct {
	// Addr is host:port of the server; the integrator passes the primary
	// when locks.mysql.addr is empty.
	Addr string
	// User and Password authenticate (rules.yaml: the first user).
	User, Password string
	// Table is "table" or "database.table". Default DefaultTable.
	Table string
	// Database holds an unqualified Table; created if missing (best
	// effort). Default DefaultDatabase.
	Database string
}

// Options tune a Locker. The zero value (or nil) works.
type Options struct {
	// TTL is the lease: how long a lock outlives its holder's last
	// renewal. Default 30s.
	TTL time.Duration
	// OpTimeout bounds each statement (and the dial) made without a
	// caller's deadline; an acquire's statements are bounded by its wait,
	// a renewal's and a release's by the lease. Default 1s.
	OpTimeout time.Duration
	// MinPoll and MaxPoll bound the backoff of a waiting Acquire.
	// Defaults 2ms and 100ms.
	MinPoll, MaxPoll time.Duration
	// MaxConns caps the Locker's connections (Open only). Default 16.
	MaxConns int
	// SchemaPoll is how often the schema-change row is read
	// (lockmgr.SchemaAnnouncer): another instance's announcement is heard
	// within this long. Default DefaultSchemaPoll.
	SchemaPoll time.Duration
	// SlowWait: a wait at least this long is logged. Default 1s.
	SlowWait time.Duration
	// Logger gets warnings. Default no-op.
	Logger *zap.Logger
	// Metrics, if not nil, records the lock metrics.
	Metrics *lockmgr.Metrics
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	leasebook.Defaults(&v.TTL, &v.OpTimeout, nil)
	if v.MaxConns <= 0 {
		v.MaxConns = 16
	}
	if v.SchemaPoll <= 0 {
		v.SchemaPoll = DefaultSchemaPoll
	}
	return v
}

// Locker is the lock-table lockmgr.Locker. Safe for concurrent use.
type Locker struct {
	e         *pollwait.Engine
	st        *store
	word      *schemaWord
	opTimeout time.Duration
	own       *sql.DB // closed by Close when Open made it
}

var _ lockmgr.Locker = (*Locker)(nil)

// Open makes a Locker with a connection pool of its own on cfg.Addr. It
// does not talk to the server: the tables are created on first use, and
// Acquire fails with lockmgr.ErrUnavailable while the server is down.
func Open(cfg Config, o *Options) (*Locker, error) {
	opt := o.withDefaults()
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	tn, err := parseTable(cfg.Table, cfg.Database)
	if err != nil {
		return nil, err
	}
	connector, err := Connector(DriverConfig(cfg.Addr, cfg.User, cfg.Password))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(opt.MaxConns)
	db.SetMaxIdleConns(opt.MaxConns)
	db.SetConnMaxIdleTime(time.Minute)
	l := newLocker(db, tn, opt)
	l.own = db
	return l, nil
}

// New makes a Locker on db, a pool the caller keeps (Close leaves it open;
// it must not be shared with application transactions, and should be made
// with Connector). table is "table" (in db's default database) or
// "database.table".
func New(db *sql.DB, table string, o *Options) (*Locker, error) {
	tn, err := parseTable(table, "")
	if err != nil {
		return nil, err
	}
	return newLocker(db, tn, o.withDefaults()), nil
}

func newLocker(db *sql.DB, tn tableName, opt Options) *Locker {
	cfg := pollwait.Config{
		Name: "mysqllock", TTL: opt.TTL, OpTimeout: opt.OpTimeout, CallerBound: true,
		MinPoll: opt.MinPoll, MaxPoll: opt.MaxPoll, SlowWait: opt.SlowWait,
		Logger: opt.Logger, Metrics: opt.Metrics,
	}
	st := newStore(db, tn, opt.TTL, cfg.TicketTTL())
	return &Locker{e: pollwait.New(st, cfg), st: st, opTimeout: opt.OpTimeout,
		word: startSchemaWord(st, leasebook.NewID(), opt.SchemaPoll)}
}

// DriverConfig is the go-sql-driver configuration the Locker's own
// connections use: no dial, read or write timeout of the driver's own, so
// every statement, and the dial of the connection it needs, is bounded by
// its caller's context alone (an acquire's wait, a renewal's or release's
// lease, OpTimeout for a call without a deadline): a lock table slower
// than a fixed per-call timeout but answering within the wait still
// grants, and one that is down still turns into lockmgr.ErrUnavailable
// when that context ends. A lock-wait timeout of 1s on the lock rows: a
// statement that waited that long for another's row lock is simply tried
// again.
func DriverConfig(addr, user, password string) *mysql.Config {
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", addr, user, password
	c.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	// The driver negotiates TLS inside the protocol, over this socket.
	c.DialFunc = rawsock.DialFunc(&net.Dialer{KeepAliveConfig: rawsock.KeepAlive}, nil)
	return c
}

// Acquire implements lockmgr.Locker.
func (l *Locker) Acquire(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (*lockmgr.Lease, error) {
	return l.e.Acquire(ctx, owner, keys)
}

// Snapshot implements lockmgr.Locker.
func (l *Locker) Snapshot() []lockmgr.Entry { return l.e.Snapshot() }

// Close implements lockmgr.Locker: it releases every held lease (bounded),
// stops renewal, and closes the pool if Open made it. Idempotent.
func (l *Locker) Close() error {
	_ = l.e.Close()
	l.word.stop()
	if l.own != nil {
		return l.own.Close()
	}
	return nil
}

// Abandon stops the Locker as if its process died: no renewals, no
// releases; its rows expire with their leases. For tests.
func (l *Locker) Abandon() {
	l.e.Abandon()
	l.word.stop()
}

// Connector makes connections for a Locker's pool from c (see
// DriverConfig): each new connection is switched to READ COMMITTED, so the
// lock statements take no gap locks on the waiter table and do not block
// each other beyond the rows they change.
func Connector(c *mysql.Config) (driver.Connector, error) {
	inner, err := mysql.NewConnector(c)
	if err != nil {
		return nil, fmt.Errorf("mysqllock: %w", err)
	}
	return rcConnector{inner}, nil
}

type rcConnector struct{ driver.Connector }

func (c rcConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if ex, ok := conn.(driver.ExecerContext); ok {
		if _, err := ex.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// Ping reports whether the lock database answers (for readiness checks),
// as an error wrapping lockmgr.ErrUnavailable if it does not.
func (l *Locker) Ping(ctx context.Context) error {
	if err := l.st.db.PingContext(ctx); err != nil {
		return l.st.wrap("ping", err)
	}
	return nil
}
