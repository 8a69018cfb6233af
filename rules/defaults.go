package rules

import (
	"fmt"
	"strings"
	"time"
)

// Defaults of rules.yaml (see docs/configuration.md).
const (
	DefaultListen           = "127.0.0.1:3307"
	DefaultAdminListen      = "127.0.0.1:9307"
	DefaultMaxConnections   = 4096
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultShutdownGrace    = 30 * time.Second
	DefaultMaxAllowedPacket = 64 << 20
	DefaultMaxReplicaLag    = 2 * time.Second
	DefaultSchemaRefresh    = 30 * time.Second
	DefaultMaxHandshakes    = 256
	DefaultMemoryBudget     = 1 << 30
	MinSessionMemory        = 128 << 20
	// DefaultMaxStatementSize is max_statement_size when neither it nor
	// max_allowed_packet is set (it follows max_allowed_packet).
	DefaultMaxStatementSize = DefaultMaxAllowedPacket
	DefaultMaxNesting       = 256
	DefaultLockBackend      = LockBackendMemory
	DefaultLockTTL          = 30 * time.Second
	DefaultWaitTimeout      = 5 * time.Second
	DefaultSlowWait         = time.Second
	// DefaultCombineMaxBatch is rules[].combine.max_batch when left out.
	DefaultCombineMaxBatch = 128
	// DefaultCombineMarkerTable is rules[].combine.marker_table when left
	// out; CombineMarkerNone turns the marker off.
	DefaultCombineMarkerTable = "lockproxy.lockproxy_combine"
	CombineMarkerNone         = "none"
	// DefaultCombineHoldWindow is rules[].combine.hold_window when left
	// out.
	DefaultCombineHoldWindow = 5 * time.Millisecond
	// DefaultLocalHandoffs and DefaultLocalHandoffWindow bound local lock
	// hand-offs in a row (see RedisConfig.LocalHandoffs): a row with short
	// holds stays on one instance for up to 64 transactions, one with
	// long holds for up to 50ms of them.
	DefaultLocalHandoffs      = 64
	DefaultLocalHandoffWindow = 50 * time.Millisecond
	// MaxLinger bounds locks.redis.linger: a lingering lock keeps other
	// instances' waiters waiting, so it is a pause between statements,
	// not a hold.
	MaxLinger = 100 * time.Millisecond
	// MaxReleaseWindow bounds locks.redis.release_window: a held release
	// makes other instances' waiters wait, so it is a batching delay.
	MaxReleaseWindow = 10 * time.Millisecond
	// DefaultReleaseWindow is locks.redis.release_window: the release of
	// a row lock nobody else wanted waits up to 1ms for the instance's
	// next lock request to ride with (RedisConfig.Window).
	DefaultReleaseWindow  = time.Millisecond
	DefaultMySQLLockTable = "lockproxy_locks"
	// DefaultLoginThrottle is proxy.login_throttle: failed logins slow
	// the next ones down.
	DefaultLoginThrottle = true
	// DefaultPoolMultiplex is backends.pool.multiplex: sessions share
	// the primary's connections.
	DefaultPoolMultiplex = true
	// DefaultPoolMaxIdle is backends.pool.max_idle: idle connections kept
	// per login.
	DefaultPoolMaxIdle = 64
	// DefaultPoolWaitTimeout is backends.pool.wait_timeout.
	DefaultPoolWaitTimeout = 5 * time.Second
)

// The values of locks.backend.
const (
	LockBackendRedis     = "redis"
	LockBackendMemory    = "memory"
	LockBackendMySQL     = "mysql"
	LockBackendEtcd      = "etcd"
	LockBackendZooKeeper = "zookeeper"
)

// LockBackends lists every value locks.backend accepts, in the order
// problems name them. Validation and the command that builds the lock
// service both switch on these names; a backend added here must be added
// to both.
var LockBackends = []string{LockBackendRedis, LockBackendMemory, LockBackendMySQL, LockBackendEtcd, LockBackendZooKeeper}

// Lock classes a rule may name in lock:, and the values of the other
// single-word settings of a rule and of locks (see docs/configuration.md).
const (
	LockWrite        = "write"
	LockLockingRead  = "locking_read"
	LockReadInTxn    = "read_in_txn"
	OnUnkeyedReject  = "reject"
	OnUnkeyedAllow   = "allow"
	OnUnavailReject  = "reject"
	OnUnavailPass    = "passthrough"
	RoutePrimary     = "primary"
	ModeEnforce      = "enforce"
	ModeObserve      = "observe"
	RewriteDelta     = "delta"
	RewriteCAS       = "cas"
	RedisModeRedlock = "redlock"
)

// Values of a rule's rewrite.scope, rewrite.on_conflict and
// rewrite.on_unpaired; the first of each is the default.
const (
	ScopeTransaction   = "transaction"
	ScopeSession       = "session"
	OnConflictError    = "error"
	OnConflictZeroRows = "zero_rows"
	OnUnpairedAllow    = "allow"
	OnUnpairedReject   = "reject"
)

// applyDefaults fills what the file left out. Presence, not zero-ness,
// decides: an explicit "wait_timeout: 0s" stays 0 (do not wait).
func applyDefaults(cfg *Config, d *decoder) {
	setStr(&cfg.Proxy.Listen, DefaultListen)
	setStr(&cfg.Admin.Listen, DefaultAdminListen)
	if !d.isSet("proxy.max_connections") {
		cfg.Proxy.MaxConnections = DefaultMaxConnections
	}
	setDur(d, "proxy.handshake_timeout", &cfg.Proxy.HandshakeTimeout, DefaultHandshakeTimeout)
	setDur(d, "proxy.shutdown_grace", &cfg.Proxy.ShutdownGrace, DefaultShutdownGrace)
	if !d.isSet("proxy.max_allowed_packet") {
		cfg.Proxy.MaxAllowedPacket = DefaultMaxAllowedPacket
	}
	proxyLimitDefaults(&cfg.Proxy, d)
	if !d.isSet("proxy.login_throttle") {
		cfg.Proxy.LoginThrottle = DefaultLoginThrottle
	}
	setDur(d, "backends.max_replica_lag", &cfg.Backends.MaxReplicaLag, DefaultMaxReplicaLag)
	setDur(d, "backends.schema_refresh", &cfg.Backends.SchemaRefresh, DefaultSchemaRefresh)
	if !d.isSet("backends.pool.multiplex") {
		cfg.Backends.Pool.Multiplex = DefaultPoolMultiplex
	}
	if !d.isSet("backends.pool.max_idle") {
		cfg.Backends.Pool.MaxIdle = DefaultPoolMaxIdle
	}
	setDur(d, "backends.pool.wait_timeout", &cfg.Backends.Pool.WaitTimeout, DefaultPoolWaitTimeout)
	switch strings.ToLower(string(cfg.Backends.ReadYourWrites)) {
	case "", "true": // the boolean of earlier versions
		cfg.Backends.ReadYourWrites = RYWSession
	case "false":
		cfg.Backends.ReadYourWrites = RYWOff
	}
	setStr(&cfg.Locks.Backend, DefaultLockBackend)
	setDur(d, "locks.ttl", &cfg.Locks.TTL, DefaultLockTTL)
	setDur(d, "locks.wait_timeout", &cfg.Locks.WaitTimeout, DefaultWaitTimeout)
	setDur(d, "locks.slow_wait", &cfg.Locks.SlowWait, DefaultSlowWait)
	setStr(&cfg.Locks.OnUnavailable, OnUnavailReject)
	if m := cfg.Locks.MySQL; m != nil {
		setStr(&m.Table, DefaultMySQLLockTable)
	}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if !d.isSet(fmt.Sprintf("rules[%d].lock", i)) {
			r.Lock = []string{LockWrite, LockLockingRead, LockReadInTxn}
		}
		setStr(&r.OnUnkeyed, OnUnkeyedReject)
		setStr(&r.OnUnkeyedRead, OnUnkeyedAllow)
		setStr(&r.Mode, ModeEnforce)
		if c := r.Combine; c != nil && c.MaxBatch == 0 {
			c.MaxBatch = DefaultCombineMaxBatch
		}
		if c := r.Combine; c != nil {
			setStr(&c.MarkerTable, DefaultCombineMarkerTable)
			setDur(d, fmt.Sprintf("rules[%d].combine.hold_window", i), &c.HoldWindow, DefaultCombineHoldWindow)
		}
		if rw := r.Rewrite; rw != nil {
			setStr(&rw.Scope, ScopeTransaction)
			setStr(&rw.OnConflict, OnConflictError)
			setStr(&rw.OnUnpaired, OnUnpairedAllow)
		}
	}
}

func setStr(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setDur(d *decoder, path string, p *Duration, def time.Duration) {
	if !d.isSet(path) {
		*p = Duration(def)
	}
}

// EffectiveWaitTimeout is how long a statement matching r waits for its
// locks: the rule's wait_timeout when given (non-zero), else locks.wait_timeout.
func (r *Rule) EffectiveWaitTimeout(l LockConfig) time.Duration {
	if r.WaitTimeout > 0 {
		return r.WaitTimeout.D()
	}
	return l.WaitTimeout.D()
}

// Locks reports whether r takes its row lock for statements of class c.
func (r *Rule) Locks(c LockClass) bool {
	for _, l := range r.Lock {
		if l == string(c) {
			return true
		}
	}
	return false
}

// proxyLimitDefaults fills the limits that keep hostile clients from
// exhausting connections and memory. The session budget follows
// max_allowed_packet (a session must be able to hold its largest packet
// twice: the packet and the statement made from it); the global budget is
// at least one session's.
func proxyLimitDefaults(p *ProxyConfig, d *decoder) {
	if !d.isSet("proxy.max_handshakes") {
		p.MaxHandshakes = DefaultMaxHandshakes
	}
	if !d.isSet("proxy.session_memory") {
		p.SessionMemory = max(MinSessionMemory, 2*p.MaxAllowedPacket)
	}
	if !d.isSet("proxy.memory_budget") {
		p.MemoryBudget = max(DefaultMemoryBudget, p.SessionMemory)
	}
	if !d.isSet("proxy.max_statement_size") {
		// Every statement a client may send is analysed, as MariaDB
		// runs every statement within its max_allowed_packet; the
		// memory budget refuses one whose analysis it cannot hold.
		p.MaxStatementSize = p.MaxAllowedPacket
	}
	if !d.isSet("proxy.max_nesting") {
		p.MaxNesting = DefaultMaxNesting
	}
}
