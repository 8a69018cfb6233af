package rules

import (
	"strings"
	"time"
)

// Config is the whole of rules.yaml after ${VAR} expansion, defaults and
// validation. A *Config is immutable once Load returns it: a reload builds a
// new one and swaps it in, so readers may share it across goroutines.
type Config struct {
	Proxy    ProxyConfig   `yaml:"proxy"`
	Admin    AdminConfig   `yaml:"admin"`
	Users    []User        `yaml:"users"`
	Backends BackendConfig `yaml:"backends"`
	Locks    LockConfig    `yaml:"locks"`
	Rules    []Rule        `yaml:"rules"`

	// UsersFromBackend (users.from_backend, set with the mapping form of
	// users:) serves every account of the primary that Users does not
	// name: clients log in with the account's own mysql_native_password
	// password, checked against the hash the primary stores.
	UsersFromBackend bool `yaml:"-"`

	// Path is the file the config was loaded from (empty for LoadBytes).
	Path string `yaml:"-"`

	// lines maps key paths ("rules[1].key") to the line that set them.
	lines map[string]int
}

// Line returns the line of the file where the key path (for example
// "rules[1].key") or its nearest enclosing key was set, or 0 when unknown.
// Problems found after loading (LoadSchema) use it to point at the file.
func (c *Config) Line(path string) int {
	d := decoder{lines: c.lines}
	return d.line(path)
}

// ProxyConfig is the MySQL-protocol listener for applications.
type ProxyConfig struct {
	Listen         string     `yaml:"listen"`          // default 127.0.0.1:3307
	MaxConnections int        `yaml:"max_connections"` // default 4096; over it clients get 1040
	TLS            *TLSConfig `yaml:"tls"`             // optional
	// HandshakeTimeout bounds how long a client may take to authenticate.
	HandshakeTimeout Duration `yaml:"handshake_timeout"` // default 10s
	// ShutdownGrace is how long SIGTERM waits for open sessions.
	ShutdownGrace Duration `yaml:"shutdown_grace"` // default 30s
	// MaxAllowedPacket is the largest client packet accepted (bytes).
	MaxAllowedPacket Size `yaml:"max_allowed_packet"` // default 64 MiB
	// RequireTLS refuses clients that do not switch to TLS (needs tls).
	RequireTLS bool `yaml:"require_tls"`
	// IdleTimeout closes a client connection idle between commands for
	// longer than this; 0 (default) leaves it to the backend's wait_timeout.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHandshakes bounds the connections still authenticating, counted
	// apart from MaxConnections; over it the oldest of them is closed, so
	// idle sockets cannot keep real logins out.
	MaxHandshakes int `yaml:"max_handshakes"` // default 256
	// MemoryBudget bounds the bytes all sessions together may hold in
	// buffered client packets, long data, prepared statements' plans and
	// statements being analysed; a command that would exceed it gets 1041.
	MemoryBudget Size `yaml:"memory_budget"` // default 1 GiB
	// SessionMemory is the same bound for one session.
	SessionMemory Size `yaml:"session_memory"` // default 2 x max_allowed_packet, at least 128 MiB
	// MaxStatementSize is the longest statement text lockproxy analyses;
	// longer ones are refused (when any rule or replica needs analysis).
	MaxStatementSize Size `yaml:"max_statement_size"` // default max_allowed_packet
	// MaxNesting is the deepest nesting of parentheses a statement may
	// have; deeper ones are refused with 1473 before the parser sees them.
	MaxNesting int `yaml:"max_nesting"` // default 256
	// LoginThrottle (default true) slows password guessing: past a few
	// failed logins of an account, or many from one address, attempts
	// are refused (1129) while earlier failures hold their slots. Off, a
	// login is answered as MariaDB answers it, however many failed before.
	LoginThrottle bool `yaml:"login_throttle"`
}

// TLSConfig names a PEM certificate and key for client TLS.
type TLSConfig struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// AdminConfig is the admin HTTP listener (/metrics, /healthz, /readyz, /debug/locks).
type AdminConfig struct {
	Listen string `yaml:"listen"` // default 127.0.0.1:9307
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every admin endpoint except /healthz.
	Token string `yaml:"token"`
}

// User is a client credential; the same credentials open backend
// connections. With FromBackend the password is not given: the user's
// account is read from the primary, as for users.from_backend.
type User struct {
	User        string `yaml:"user"`
	Password    string `yaml:"password"`
	FromBackend bool   `yaml:"from_backend"`
	// MaxConnections bounds the sessions this user may have logged in at
	// once (0: only proxy.max_connections bounds them), as MariaDB's
	// max_user_connections does: one application cannot take every slot.
	MaxConnections int `yaml:"max_connections"`
}

// BackendConfig names the MySQL/MariaDB servers behind the proxy.
type BackendConfig struct {
	Primary       string   `yaml:"primary"`
	Replicas      []string `yaml:"replicas"`
	MaxReplicaLag Duration `yaml:"max_replica_lag"` // default 2s
	// ReadYourWrites (default session): whose writes a replica must have
	// applied before it serves a session's read (ReadYourWrites).
	ReadYourWrites ReadYourWrites `yaml:"read_your_writes"`
	// SchemaRefresh (default 30s) is how often the guarded tables' columns
	// and the primary's views, routines, triggers and foreign keys are
	// read again, so objects made directly on the primary are seen within
	// it; 0: only at start, on reload and after DDL through lockproxy.
	SchemaRefresh Duration `yaml:"schema_refresh"`
	// TLS, when set, makes every connection lockproxy opens to the
	// primary and the replicas (sessions, health checks, schema reads,
	// the mysql lock table on the primary) use TLS.
	TLS *TLSClientConfig `yaml:"tls"`
	// Pool is how sessions use primary connections (backends.pool).
	Pool PoolConfig `yaml:"pool"`
}

// PoolConfig is backends.pool: whether sessions share primary
// connections, and the bounds of the connections lockproxy keeps.
type PoolConfig struct {
	// Multiplex (default true): a session borrows a primary connection
	// for one autocommit statement or one transaction and gives it back
	// when nothing ties the session to it; false pins one connection to
	// each session for its whole life.
	Multiplex bool `yaml:"multiplex"`
	// MaxConnections bounds, with Multiplex, the primary connections
	// open at once (lent and idle); 0: no bound.
	MaxConnections int `yaml:"max_connections"`
	// MaxIdle (default 64) is how many idle connections are kept per
	// login (user, database, capabilities); more are closed.
	MaxIdle int `yaml:"max_idle"`
	// IdleTimeout closes a connection idle that long (0: kept until the
	// server ends it).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// WaitTimeout (default 5s) bounds how long a session waits for a
	// primary connection when MaxConnections are open.
	WaitTimeout Duration `yaml:"wait_timeout"`
}

// TLSClientConfig is how lockproxy connects to a server with TLS. The
// server's certificate is verified against CA (the system's roots when
// empty) for ServerName (the host of the address dialled when empty);
// SkipVerify turns verification off (encryption without authentication:
// for tests only). Cert and Key, together, are the client certificate.
type TLSClientConfig struct {
	CA         string `yaml:"ca"`
	Cert       string `yaml:"cert"`
	Key        string `yaml:"key"`
	ServerName string `yaml:"server_name"`
	SkipVerify bool   `yaml:"skip_verify"`
}

// RYW reports whether read-your-writes is on (the default).
func (b BackendConfig) RYW() bool { return b.ReadYourWrites != RYWOff }

// ReadYourWrites is backends.read_your_writes: before a replica serves a
// session's read, it must have applied the last GTID written through this
// lockproxy by the session itself (RYWSession, the default), by any
// session of the same user (RYWUser: a pool that writes on one
// connection and reads on another reads its writes), or by any session
// (RYWGlobal); RYWOff: any healthy replica within the lag. The YAML
// booleans of earlier versions still read: true is session, false off.
type ReadYourWrites string

// The values of ReadYourWrites.
const (
	RYWSession ReadYourWrites = "session"
	RYWUser    ReadYourWrites = "user"
	RYWGlobal  ReadYourWrites = "global"
	RYWOff     ReadYourWrites = "off"
)

// LockConfig selects and tunes the distributed lock backend.
type LockConfig struct {
	// Backend is one of LockBackends; default memory.
	Backend       string           `yaml:"backend"`
	Redis         *RedisConfig     `yaml:"redis"`
	MySQL         *MySQLLockConfig `yaml:"mysql"`
	Etcd          *EtcdConfig      `yaml:"etcd"`
	ZooKeeper     *ZKConfig        `yaml:"zookeeper"`
	TTL           Duration         `yaml:"ttl"`            // default 30s
	WaitTimeout   Duration         `yaml:"wait_timeout"`   // default 5s
	OnUnavailable string           `yaml:"on_unavailable"` // reject | passthrough; default reject
	// SlowWait: a lock wait longer than this is written to the audit log
	// with rule, key, waiter and how long it waited. Default 1s.
	SlowWait Duration `yaml:"slow_wait"`
}

// RedisConfig addresses one server, a Sentinel group, a Cluster, or (mode:
// redlock) several independent servers.
type RedisConfig struct {
	Addrs      []string `yaml:"addrs"`
	MasterName string   `yaml:"master_name"`
	Cluster    bool     `yaml:"cluster"`
	Mode       string   `yaml:"mode"` // "" | redlock
	Username   string   `yaml:"username"`
	Password   string   `yaml:"password"`
	DB         int      `yaml:"db"`
	// TLS, when set, makes every connection to Redis (servers, sentinels,
	// cluster nodes) use TLS, verified as for backends.tls.
	TLS *TLSClientConfig `yaml:"tls"`
	// LocalHandoffs is how many times in a row a row lock released by one
	// session may pass to another session of the same instance waiting
	// for it (since before Redis granted it), without a round trip to
	// Redis; nil: DefaultLocalHandoffs, 0: every release goes to Redis.
	// Not with mode redlock.
	LocalHandoffs *int `yaml:"local_handoffs"`
	// LocalHandoffWindow also ends a row lock's hand-offs once that long
	// has passed since Redis granted it to the instance, so long
	// transactions do not keep other instances waiting for LocalHandoffs
	// of them; nil: DefaultLocalHandoffWindow, 0: no time bound.
	LocalHandoffWindow *Duration `yaml:"local_handoff_window"`
	// Linger, when positive, keeps a row lock that a statement or
	// transaction holding only it gave back with the instance for that
	// long: the next statement of any of its sessions that needs that
	// key alone takes it over without Redis (a local hand-off, within
	// LocalHandoffs and LocalHandoffWindow), else it is released when
	// the time is up. 0 (the default): released at once. Not with mode
	// redlock.
	Linger Duration `yaml:"linger"`
	// ReleaseWindow, when positive, lets the release of a row lock
	// nobody else asked for while it was held wait up to that long to go
	// to Redis with the instance's next lock request (one round trip for
	// both instead of two); a session of any instance that asks for the
	// key has it sent at once. nil: DefaultReleaseWindow (0 with mode
	// redlock); 0: sent when made. Not with mode redlock.
	ReleaseWindow *Duration `yaml:"release_window"`
	// MinReplicasAck, when positive, makes each grant wait (Redis WAIT)
	// until that many replicas of the master holding the key have it,
	// before the statement runs; 0: no wait. Not with mode redlock.
	MinReplicasAck int `yaml:"min_replicas_ack"`
}

// Handoffs is LocalHandoffs with its default applied.
func (r *RedisConfig) Handoffs() int {
	if r == nil || r.LocalHandoffs == nil {
		return DefaultLocalHandoffs
	}
	return *r.LocalHandoffs
}

// HandoffWindow is LocalHandoffWindow with its default applied.
func (r *RedisConfig) HandoffWindow() time.Duration {
	if r == nil || r.LocalHandoffWindow == nil {
		return DefaultLocalHandoffWindow
	}
	return r.LocalHandoffWindow.D()
}

// Window is ReleaseWindow with its default applied: DefaultReleaseWindow,
// or 0 with mode redlock, whose servers cannot carry a release in another
// request's pipeline.
func (r *RedisConfig) Window() time.Duration {
	switch {
	case r != nil && r.ReleaseWindow != nil:
		return r.ReleaseWindow.D()
	case r != nil && r.Mode == RedisModeRedlock:
		return 0
	}
	return DefaultReleaseWindow
}

// MySQLLockConfig keeps locks as rows of a table.
type MySQLLockConfig struct {
	Table string `yaml:"table"` // default lockproxy_locks
	Addr  string `yaml:"addr"`  // default: the primary
}

// EtcdConfig lists etcd endpoints.
type EtcdConfig struct {
	Endpoints []string `yaml:"endpoints"`
}

// ZKConfig lists ZooKeeper servers.
type ZKConfig struct {
	Servers []string `yaml:"servers"`
}

// Rule guards one table: which statements lock which row keys, how they are
// routed, and how read-then-write updates of one column are rewritten.
type Rule struct {
	Name        string   `yaml:"name"`
	Table       string   `yaml:"table"` // db.table or table (any database); case-insensitive
	Key         []string `yaml:"key"`
	Lock        []string `yaml:"lock"`  // write | locking_read | read_in_txn; default all three
	Route       string   `yaml:"route"` // "" | primary
	WaitTimeout Duration `yaml:"wait_timeout"`
	OnUnkeyed   string   `yaml:"on_unkeyed"` // reject | allow; default reject
	// OnUnkeyedRead is what happens to a plain SELECT inside a transaction
	// (read_in_txn) whose rows lockproxy cannot key (a range, a full
	// scan): allow (default: it runs without row locks, counted and
	// audited; it is a read, not a write) or reject (1105, as on_unkeyed).
	OnUnkeyedRead string   `yaml:"on_unkeyed_read"`
	Rewrite       *Rewrite `yaml:"rewrite"`
	// Fence names a BIGINT column of the guarded table that lockproxy
	// stamps with the lock's fencing token on every locked UPDATE, which
	// then changes only rows whose fence is below the token: a holder
	// whose lease passed to a newer holder cannot overwrite its writes.
	Fence string `yaml:"fence"`
	// Sensitive names columns of the guarded table whose values lockproxy
	// never shows: a key column's value enters the lock key as its
	// SHA-256 (so logs, /debug/locks, SHOW LOCKPROXY, Redis and error
	// messages carry only the hash), and while any rule has sensitive
	// columns, statements in /debug/locks and SHOW LOCKPROXY LOCKS are shown
	// with every literal replaced by "?".
	Sensitive []string `yaml:"sensitive"`
	// AllowRoutines names stored procedures and functions ("db.name") that
	// may run although their bodies may write the guarded table. lockproxy
	// cannot see into a routine, so it refuses a CALL of one (and any
	// statement calling such a function) unless this rule lists it: the
	// routine's own writes then run without lockproxy's row locks.
	AllowRoutines []string `yaml:"allow_routines"`
	// AllowTriggers names triggers ("db.name") whose bodies may write the
	// guarded table and that may still fire: writes to the trigger's table
	// are refused unless this rule lists it; the trigger's writes then run
	// without lockproxy's row locks.
	AllowTriggers []string `yaml:"allow_triggers"`
	// Mode is enforce (default: lockproxy takes the rule's locks, refuses
	// and rewrites) or observe (it decides exactly as enforce would, then
	// only counts and audits what it would have done).
	Mode string `yaml:"mode"`
	// Combine, when present, runs the autocommit relative updates of the
	// rewrite column of one row that wait on each other as one
	// transaction per batch (hot-row combining, docs/configuration.md).
	Combine *Combine `yaml:"combine"`
}

// Combine is rules[].combine: hot-row combining of a rewrite rule's
// relative updates.
type Combine struct {
	// MaxBatch bounds the statements one batch runs (default
	// DefaultCombineMaxBatch).
	MaxBatch int `yaml:"max_batch"`
	// MarkerTable is the db.table where each batch writes its marker in
	// its own transaction, so that lockproxy learns exactly whether a
	// batch whose connection died after COMMIT committed (default
	// DefaultCombineMarkerTable; CombineMarkerNone: no marker, the row
	// is read again instead).
	MarkerTable string `yaml:"marker_table"`
	// HoldWindow bounds how long after the lock service granted the
	// row's lock the instance may pass it from one batch to the next
	// without the service (default DefaultCombineHoldWindow; 0: only
	// locks.redis.local_handoff_window bounds it): the other instances'
	// batches of the row wait about this long for their turn.
	HoldWindow Duration `yaml:"hold_window"`
}

// Marker is the marker table's db and table name; ok is false when the
// rule writes no marker.
func (c *Combine) Marker() (db, table string, ok bool) {
	if c == nil || c.MarkerTable == CombineMarkerNone {
		return "", "", false
	}
	name := c.MarkerTable
	if name == "" {
		name = DefaultCombineMarkerTable
	}
	db, table, ok = SplitTable(name)
	return db, table, ok && db != ""
}

// Combines reports whether the rule combines: combine is present and
// the rule enforces (an observing rule changes nothing of how
// statements run).
func (r *Rule) Combines() bool { return r.Combine != nil && r.Rewrite != nil && !r.Observes() }

// Observes reports whether the rule is in observe mode: its decisions are
// counted and audited, never enforced.
func (r *Rule) Observes() bool { return r.Mode == ModeObserve }

// AllowsRoutine reports whether the rule lists the stored procedure or
// function name ("db.name", any case) in allow_routines.
func (r *Rule) AllowsRoutine(name string) bool { return listed(r.AllowRoutines, name) }

// AllowsTrigger reports whether the rule lists the trigger name ("db.name",
// any case) in allow_triggers.
func (r *Rule) AllowsTrigger(name string) bool { return listed(r.AllowTriggers, name) }

func listed(list []string, name string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), name) {
			return true
		}
	}
	return false
}

// IsSensitive reports whether col is one of the rule's sensitive columns
// (case-insensitive).
func (r *Rule) IsSensitive(col string) bool {
	for _, c := range r.Sensitive {
		if strings.EqualFold(c, col) {
			return true
		}
	}
	return false
}

// Rewrite turns absolute updates of Column into conditional ones.
type Rewrite struct {
	Column string   `yaml:"column"`
	Mode   string   `yaml:"mode"` // delta | cas
	Min    *float64 `yaml:"min"`
	// Scope is how long a value read stays paired with later writes:
	// transaction (default: until the transaction that read it ends;
	// nothing is remembered between autocommit statements) or session
	// (until the connection is reset, for applications that hold one
	// connection per request).
	Scope string `yaml:"scope"`
	// OnConflict is what the client gets when the guarded UPDATE changed
	// no row because its guard held: error (default: 1213 when the value
	// moved, 4025 when min would be crossed; the transaction is rolled
	// back) or zero_rows (0 rows affected, for code that checks them).
	OnConflict string `yaml:"on_conflict"`
	// OnUnpaired is what happens to an absolute write of Column with no
	// value read in scope: allow (default: it runs as sent, counted and
	// audited) or reject (1105).
	OnUnpaired string `yaml:"on_unpaired"`
}

// Duration is a time.Duration written in YAML as "2s", "150ms", "1m".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
