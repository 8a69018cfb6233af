package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/etcdlock"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/lockmgr/mysqllock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/lockmgr/redlock"
	"github.com/lockproxy/lockproxy/lockmgr/zklock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// lockBackend is the lock service as the process uses it.
type lockBackend struct {
	locker lockmgr.Locker
	close  func()
	// ping reports whether the lock service answers (for /readyz).
	ping func(ctx context.Context) error
	// metrics are the lock metrics the backend records.
	metrics *lockmgr.Metrics
}

// checkProbeTimeout bounds --check's question to the lock service.
const checkProbeTimeout = 3 * time.Second

// probeLockService asks the Redis that rules.yaml names for locks whether
// it would serve them now, as /readyz does (reachable, and not able to
// evict lock keys), and returns what is wrong, "" if nothing is or the
// backend is not Redis. A Redis that cannot be asked is reported, not
// treated as an error of the file: --check may run where it is not
// reachable.
func probeLockService(cfg *rules.Config) string {
	if cfg.Locks.Backend != rules.LockBackendRedis {
		return ""
	}
	lb, err := newLocker(cfg, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		return fmt.Sprintf("lock service (%s): %v", cfg.Locks.Backend, err)
	}
	defer lb.close()
	if lb.ping == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkProbeTimeout)
	defer cancel()
	if err := lb.ping(ctx); err != nil {
		return fmt.Sprintf("lock service (%s) not ready: %v", cfg.Locks.Backend, err)
	}
	return ""
}

// newLocker builds the lock backend rules.yaml names.
func newLocker(cfg *rules.Config, reg prometheus.Registerer, log *zap.Logger) (*lockBackend, error) {
	m, err := lockmgr.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	name := cfg.Locks.Backend
	if name == "" {
		name = rules.DefaultLockBackend
	}
	build, ok := lockBuilders[name]
	if !ok {
		return nil, fmt.Errorf("lockproxy: unknown lock backend %q", name)
	}
	lb, err := build(cfg, m, log.Named("locks"))
	if err != nil {
		return nil, err
	}
	lb.metrics = m
	m.InitRules(ruleNames(cfg))
	return lb, nil
}

// ruleNames are the names of cfg's rules, for the per-rule metric series.
func ruleNames(cfg *rules.Config) []string {
	names := make([]string, 0, len(cfg.Rules))
	for _, r := range cfg.Rules {
		names = append(names, r.Name)
	}
	return names
}

// lockBuilders builds each backend of rules.LockBackends (a test checks
// that the two lists agree).
var lockBuilders = map[string]func(*rules.Config, *lockmgr.Metrics, *zap.Logger) (*lockBackend, error){
	rules.LockBackendMemory:    newMemLocker,
	rules.LockBackendRedis:     newRedisOrRedlock,
	rules.LockBackendMySQL:     newMySQLLocker,
	rules.LockBackendEtcd:      newEtcdLocker,
	rules.LockBackendZooKeeper: newZKLocker,
}

// newMemLocker is the one-process backend: nothing to reach, always ready.
func newMemLocker(_ *rules.Config, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	l := memlock.New(log, m)
	return &lockBackend{locker: l, close: func() { _ = l.Close() }, ping: func(context.Context) error { return nil }}, nil
}

// newRedisOrRedlock is one Redis deployment (server, Sentinel, Cluster),
// or with mode: redlock a majority of independent servers.
func newRedisOrRedlock(cfg *rules.Config, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	lc := cfg.Locks
	if lc.Redis != nil && lc.Redis.Mode == rules.RedisModeRedlock {
		return newRedlock(lc, m, log)
	}
	return newRedisLocker(lc, longestCall(cfg), m, log)
}

// longestCall is the longest deadline a caller gives one lock-service
// call: the longest wait_timeout of any rule, or the lease a renewal
// extends.
func longestCall(cfg *rules.Config) time.Duration {
	d := max(cfg.Locks.TTL.D(), cfg.Locks.WaitTimeout.D())
	for i := range cfg.Rules {
		d = max(d, cfg.Rules[i].EffectiveWaitTimeout(cfg.Locks))
	}
	return d
}

func newRedisLocker(lc rules.LockConfig, longest time.Duration, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	rc := lc.Redis
	if rc == nil || len(rc.Addrs) == 0 {
		return nil, fmt.Errorf("lockproxy: locks.redis.addrs is required for the redis backend")
	}
	opts := redislock.ClientOptions(rc.Addrs, rc.MasterName, rc.Cluster)
	opts.Username, opts.Password, opts.DB = rc.Username, rc.Password, rc.DB
	redislock.BoundByCallers(opts, longest)
	tc, err := rc.TLS.Load() // a server name left empty is each node's host
	if err != nil {
		return nil, fmt.Errorf("lockproxy: locks.redis.tls: %w", err)
	}
	opts.TLSConfig = tc
	rdb := redis.NewUniversalClient(opts)
	l := redislock.New(rdb, &redislock.Options{TTL: lc.TTL.D(), SlowWait: lc.SlowWait.D(), Logger: log, Metrics: m,
		LocalHandoffs: rc.Handoffs(), LocalHandoffWindow: rc.HandoffWindow(), ReleaseWindow: rc.Window(),
		MinReplicasAck: rc.MinReplicasAck})
	return &lockBackend{locker: l, close: func() { _ = l.Close(); _ = rdb.Close() },
		ping: l.Ready}, nil
}

func newRedlock(lc rules.LockConfig, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	rc := lc.Redis
	tc, err := rc.TLS.Load()
	if err != nil {
		return nil, fmt.Errorf("lockproxy: locks.redis.tls: %w", err)
	}
	l, err := redlock.Dial(rc.Addrs, rc.Username, rc.Password,
		&redlock.Options{TTL: lc.TTL.D(), SlowWait: lc.SlowWait.D(), Logger: log, Metrics: m, TLS: tc})
	if err != nil {
		return nil, fmt.Errorf("lockproxy: redlock: %w", err)
	}
	return &lockBackend{locker: l, close: func() { _ = l.Close() }, ping: l.Ping}, nil
}

// newMySQLLocker keeps locks as rows on the primary (or locks.mysql.addr),
// with the first user's credentials, over TLS when backends.tls is set.
func newMySQLLocker(cfg *rules.Config, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	lc := cfg.Locks
	addr, table := cfg.Backends.Primary, "lockproxy."+rules.DefaultMySQLLockTable
	if lc.MySQL != nil {
		if lc.MySQL.Addr != "" {
			addr = lc.MySQL.Addr
		}
		if lc.MySQL.Table != "" {
			table = lc.MySQL.Table
			if !strings.Contains(table, ".") {
				table = "lockproxy." + table // the lock connections have no default database
			}
		}
	}
	if len(cfg.Users) == 0 {
		return nil, fmt.Errorf("lockproxy: the mysql lock backend needs a user")
	}
	dc := mysqllock.DriverConfig(addr, cfg.Users[0].User, cfg.Users[0].Password)
	if cfg.Backends.TLS != nil {
		// The lock table's server is the primary, or one beside it:
		// backends.tls applies to it too.
		btls, err := cfg.Backends.TLS.Load()
		if err != nil {
			return nil, err
		}
		dc.TLS = rules.ForAddr(btls, addr)
	}
	conn, err := mysqllock.Connector(dc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	l, err := mysqllock.New(db, table, &mysqllock.Options{TTL: lc.TTL.D(), SlowWait: lc.SlowWait.D(), Logger: log, Metrics: m})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &lockBackend{locker: l, close: func() { _ = l.Close(); _ = db.Close() }, ping: l.Ping}, nil
}

func newEtcdLocker(cfg *rules.Config, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	lc := cfg.Locks
	if lc.Etcd == nil || len(lc.Etcd.Endpoints) == 0 {
		return nil, fmt.Errorf("lockproxy: locks.etcd.endpoints is required for the etcd backend")
	}
	cli, err := clientv3.New(etcdlock.ClientConfig(lc.Etcd.Endpoints))
	if err != nil {
		return nil, fmt.Errorf("lockproxy: etcd: %w", err)
	}
	l := etcdlock.New(cli, &etcdlock.Options{TTL: lc.TTL.D(), OpTimeout: queueOpTimeout(lc), Logger: log, Metrics: m})
	ping := func(ctx context.Context) error {
		_, err := cli.Status(ctx, lc.Etcd.Endpoints[0])
		return err
	}
	return &lockBackend{locker: l, close: func() { _ = l.Close(); _ = cli.Close() }, ping: ping}, nil
}

func newZKLocker(cfg *rules.Config, m *lockmgr.Metrics, log *zap.Logger) (*lockBackend, error) {
	lc := cfg.Locks
	if lc.ZooKeeper == nil || len(lc.ZooKeeper.Servers) == 0 {
		return nil, fmt.Errorf("lockproxy: locks.zookeeper.servers is required for the zookeeper backend")
	}
	l, err := zklock.New(lc.ZooKeeper.Servers, &zklock.Options{TTL: lc.TTL.D(), OpTimeout: queueOpTimeout(lc), Logger: log, Metrics: m})
	if err != nil {
		return nil, fmt.Errorf("lockproxy: zookeeper: %w", err)
	}
	return &lockBackend{locker: l, close: func() { _ = l.Close() }, ping: l.Ping}, nil
}

// queueOpTimeout bounds one etcd or ZooKeeper call: a fifth of the lease,
// between 1s and 5s. Their wait queues are read whole, which a long queue
// on a busy server makes slow; a call that outlives this counts as the
// lock service being unavailable.
func queueOpTimeout(lc rules.LockConfig) time.Duration {
	return min(max(lc.TTL.D()/5, time.Second), 5*time.Second)
}
