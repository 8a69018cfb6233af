package rules

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// validator checks a decoded, defaulted Config and records every problem.
type validator struct {
	d  *decoder
	ps *problems
}

func (v *validator) add(path, format string, args ...any) {
	if v.ps.covered(path) {
		return
	}
	v.ps.add(v.d.line(path), path, format, args...)
}

// validate records every problem of cfg in ps.
func validate(cfg *Config, d *decoder, ps *problems) {
	v := &validator{d: d, ps: ps}
	v.proxy(&cfg.Proxy)
	v.addr("admin.listen", cfg.Admin.Listen, true)
	v.users(cfg.Users)
	v.backends(&cfg.Backends)
	v.locks(&cfg.Locks)
	v.rules(cfg.Rules)
}

func (v *validator) proxy(p *ProxyConfig) {
	v.addr("proxy.listen", p.Listen, true)
	if p.MaxConnections <= 0 {
		v.add("proxy.max_connections", "must be at least 1, got %d", p.MaxConnections)
	}
	if p.HandshakeTimeout <= 0 {
		v.add("proxy.handshake_timeout", "must be greater than 0")
	}
	if p.MaxAllowedPacket < 1024 || p.MaxAllowedPacket > 1<<30 {
		v.add("proxy.max_allowed_packet", "must be between 1024 and 1073741824 bytes, got %d", p.MaxAllowedPacket)
	}
	if p.TLS != nil {
		v.tls(p.TLS)
	} else if p.RequireTLS {
		v.add("proxy.require_tls", "needs proxy.tls (a certificate and key to offer)")
	}
	if p.IdleTimeout < 0 {
		v.add("proxy.idle_timeout", "must not be negative")
	}
	v.proxyLimits(p)
}

// proxyLimits checks the connection and memory limits against each other.
func (v *validator) proxyLimits(p *ProxyConfig) {
	if p.MaxHandshakes <= 0 {
		v.add("proxy.max_handshakes", "must be at least 1, got %d", p.MaxHandshakes)
	}
	if p.SessionMemory < p.MaxAllowedPacket {
		v.add("proxy.session_memory", "must be at least proxy.max_allowed_packet (%d), got %d", p.MaxAllowedPacket, p.SessionMemory)
	}
	if p.MemoryBudget < p.SessionMemory {
		v.add("proxy.memory_budget", "must be at least proxy.session_memory (%d), got %d", p.SessionMemory, p.MemoryBudget)
	}
	if p.MaxStatementSize < 1024 {
		v.add("proxy.max_statement_size", "must be at least 1024 bytes, got %d", p.MaxStatementSize)
	}
	if p.MaxNesting < 8 {
		v.add("proxy.max_nesting", "must be at least 8, got %d", p.MaxNesting)
	}
}

func (v *validator) tls(t *TLSConfig) {
	ok := true
	for _, f := range []struct{ path, file string }{{"proxy.tls.cert", t.Cert}, {"proxy.tls.key", t.Key}} {
		if f.file == "" {
			v.add(f.path, "must name a PEM file")
			ok = false
			continue
		}
		if _, err := os.ReadFile(f.file); err != nil {
			v.add(f.path, "cannot read: %v", err)
			ok = false
		}
	}
	if ok {
		if _, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
			v.add("proxy.tls", "not a usable certificate and key: %v", err)
		}
	}
}

// addr checks host:port; listen addresses may leave the host empty.
func (v *validator) addr(path, a string, listen bool) {
	if msg := checkAddr(a, listen); msg != "" {
		v.add(path, "%s", msg)
	}
}

func checkAddr(a string, listen bool) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Sprintf("must be host:port, not %q", a)
	}
	if host == "" && !listen {
		return fmt.Sprintf("must name a host in %q", a)
	}
	if strings.ContainsAny(host, " /\t") {
		return fmt.Sprintf("bad host in %q", a)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port must be a number from 1 to 65535 in %q", a)
	}
	return ""
}

func (v *validator) users(users []User) {
	if len(users) == 0 {
		v.add("users", "at least one user is needed: the first runs lockproxy's own connections (and, with from_backend, reads the accounts)")
		return
	}
	seen := map[string]int{}
	for i, u := range users {
		path := fmt.Sprintf("users[%d].user", i)
		if strings.TrimSpace(u.User) == "" {
			v.add(path, "must not be empty")
			continue
		}
		if prev, dup := seen[u.User]; dup {
			v.add(path, "duplicate user %q (also users[%d])", u.User, prev)
			continue
		}
		if u.MaxConnections < 0 {
			v.add(fmt.Sprintf("users[%d].max_connections", i), "must not be negative (0: no limit of its own)")
		}
		switch {
		case u.FromBackend && i == 0:
			v.add("users[0].from_backend", "the first user runs lockproxy's own connections (and reads the accounts from the primary): it needs its password")
		case u.FromBackend && u.Password != "":
			v.add(fmt.Sprintf("users[%d].password", i), "not with from_backend: the account's password is checked against the primary's")
		}
		seen[u.User] = i
	}
}

func (v *validator) backends(b *BackendConfig) {
	if b.Primary == "" {
		v.add("backends.primary", "missing: the primary's host:port is required")
	} else {
		v.addr("backends.primary", b.Primary, false)
	}
	for i, r := range b.Replicas {
		v.addr(fmt.Sprintf("backends.replicas[%d]", i), r, false)
	}
	if b.MaxReplicaLag <= 0 {
		v.add("backends.max_replica_lag", "must be greater than 0")
	}
	if b.SchemaRefresh < 0 {
		v.add("backends.schema_refresh", "must not be negative")
	}
	switch b.ReadYourWrites {
	case RYWSession, RYWUser, RYWGlobal, RYWOff:
	default:
		v.add("backends.read_your_writes", "must be session, user, global or off (true: session, false: off), not %q", b.ReadYourWrites)
	}
	v.tlsClient("backends.tls", b.TLS)
	v.pool(&b.Pool)
}

func (v *validator) pool(p *PoolConfig) {
	if p.MaxConnections < 0 {
		v.add("backends.pool.max_connections", "must not be negative")
	}
	if p.MaxIdle < 0 {
		v.add("backends.pool.max_idle", "must not be negative")
	}
	if p.IdleTimeout < 0 {
		v.add("backends.pool.idle_timeout", "must not be negative")
	}
	if p.WaitTimeout <= 0 {
		v.add("backends.pool.wait_timeout", "must be greater than 0")
	}
}

func (v *validator) locks(l *LockConfig) {
	if l.TTL <= 0 {
		v.add("locks.ttl", "must be greater than 0")
	}
	if l.OnUnavailable != OnUnavailReject && l.OnUnavailable != OnUnavailPass {
		v.add("locks.on_unavailable", "must be reject or passthrough, not %q", l.OnUnavailable)
	}
	switch l.Backend {
	case LockBackendMemory:
	case LockBackendRedis:
		v.redis(l.Redis)
	case LockBackendMySQL:
		v.mysqlLock(l.MySQL)
	case LockBackendEtcd:
		if l.Etcd == nil || len(l.Etcd.Endpoints) == 0 {
			v.add("locks.etcd.endpoints", "backend etcd needs at least one endpoint")
			return
		}
		for i, e := range l.Etcd.Endpoints {
			v.endpoint(fmt.Sprintf("locks.etcd.endpoints[%d]", i), e)
		}
	case LockBackendZooKeeper:
		v.hostList("locks.zookeeper.servers", "zookeeper", zkServers(l.ZooKeeper))
	default:
		v.add("locks.backend", "unknown backend %q (want %s)", l.Backend, orList(LockBackends))
	}
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func zkServers(z *ZKConfig) []string {
	if z == nil {
		return nil
	}
	return z.Servers
}

func (v *validator) hostList(path, backend string, addrs []string) {
	if len(addrs) == 0 {
		v.add(path, "backend %s needs at least one host:port", backend)
	}
	for i, a := range addrs {
		v.addr(fmt.Sprintf("%s[%d]", path, i), a, false)
	}
}

// endpoint accepts host:port or an http(s) URL with host:port.
func (v *validator) endpoint(path, e string) {
	if u, err := url.Parse(e); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		e = u.Host
	}
	v.addr(path, e, false)
}

func (v *validator) redis(r *RedisConfig) {
	if r == nil {
		v.add("locks.redis", "backend redis needs a redis: section with addrs")
		return
	}
	v.hostList("locks.redis.addrs", "redis", r.Addrs)
	v.tlsClient("locks.redis.tls", r.TLS)
	switch r.Mode {
	case "":
		if distinct(r.Addrs) > 1 && r.MasterName == "" && !r.Cluster {
			v.add("locks.redis.addrs", "several addresses need cluster: true, master_name (Sentinel) or mode: redlock")
		}
	case RedisModeRedlock:
		if distinct(r.Addrs) < 3 {
			v.add("locks.redis.addrs", "mode redlock needs at least 3 independent servers, got %d", distinct(r.Addrs))
		}
		if r.MasterName != "" || r.Cluster {
			v.add("locks.redis.mode", "redlock cannot be combined with master_name or cluster")
		}
	default:
		v.add("locks.redis.mode", "unknown mode %q (want redlock or nothing)", r.Mode)
	}
	if r.MasterName != "" && r.Cluster {
		v.add("locks.redis.cluster", "cannot be combined with master_name (Sentinel)")
	}
	if r.DB < 0 || (r.Cluster && r.DB != 0) {
		v.add("locks.redis.db", "must be 0 or more (and 0 with cluster), got %d", r.DB)
	}
	if h := r.LocalHandoffs; h != nil && (*h < 0 || (*h > 0 && r.Mode == RedisModeRedlock)) {
		v.add("locks.redis.local_handoffs", "must be 0 or more (and 0 with mode redlock), got %d", *h)
	}
	if d := r.Linger.D(); d < 0 || d > MaxLinger || (d > 0 && (r.Mode == RedisModeRedlock || r.Handoffs() == 0)) {
		v.add("locks.redis.linger", "must be between 0 and %s (and 0 with mode redlock or local_handoffs 0, which hand nothing over), got %s", MaxLinger, d)
	}
	if d := r.Window(); d < 0 || d > MaxReleaseWindow || (d > 0 && r.Mode == RedisModeRedlock) {
		v.add("locks.redis.release_window", "must be between 0 and %s (and 0 with mode redlock), got %s", MaxReleaseWindow, d)
	}
	if n := r.MinReplicasAck; n < 0 || (n > 0 && r.Mode == RedisModeRedlock) {
		v.add("locks.redis.min_replicas_ack", "must be 0 or more (and 0 with mode redlock, whose servers are independent), got %d", n)
	}
}

func distinct(list []string) int {
	seen := map[string]bool{}
	for _, s := range list {
		seen[s] = true
	}
	return len(seen)
}

func (v *validator) mysqlLock(m *MySQLLockConfig) {
	if m == nil {
		return // the primary and the default table
	}
	if !validTableName(m.Table) {
		v.add("locks.mysql.table", "must be table or db.table (letters, digits, _ and $), not %q", m.Table)
	}
	if m.Addr != "" {
		v.addr("locks.mysql.addr", m.Addr, false)
	}
}

func validTableName(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if c != '_' && c != '$' && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') {
				return false
			}
		}
	}
	return true
}

// tlsClient checks a TLS client block: cert and key go together, and the
// files load.
func (v *validator) tlsClient(path string, t *TLSClientConfig) {
	if t == nil {
		return
	}
	if (t.Cert == "") != (t.Key == "") {
		v.add(path, "cert and key must be given together")
		return
	}
	if _, err := t.Load(); err != nil {
		v.add(path, "%v", err)
	}
}
