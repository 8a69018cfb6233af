package router

import (
	"crypto/tls"
	"strings"
	"time"
)

// Defaults applied by New and Update to zero or negative Config fields.
const (
	DefaultMaxLag         = 2 * time.Second
	DefaultHealthInterval = time.Second
	DefaultConnectTimeout = 2 * time.Second
	DefaultQueryTimeout   = 2 * time.Second
)

// Config says which backends exist and how they are checked. It is a plain
// value: the proxy fills it from rules.yaml (backends.primary,
// backends.replicas, backends.max_replica_lag and the first configured
// user's credentials).
type Config struct {
	// Primary is host:port of the primary. Empty means none is configured,
	// and PrimaryHealthy is then false.
	Primary string
	// Replicas are host:port of the read replicas, in order; duplicates and
	// empty entries are dropped.
	Replicas []string
	// MaxLag is the largest Seconds_Behind_Master a replica may report and
	// still take reads (inclusive). Zero or negative means DefaultMaxLag.
	MaxLag time.Duration
	// HealthInterval is the time between two checks of one backend.
	HealthInterval time.Duration
	// User and Password open the monitoring connections. On the replicas
	// the user needs the privilege to run SHOW SLAVE STATUS: SLAVE MONITOR
	// (MariaDB 10.5+) or SUPER; REPLICATION CLIENT on MySQL. Without it
	// every replica stays out, and BackendStatus.LastError says why.
	User, Password string
	// ConnectTimeout bounds dialing and the handshake of a monitoring
	// connection; QueryTimeout bounds each statement of a check.
	ConnectTimeout, QueryTimeout time.Duration
	// TLS, when not nil, makes the monitoring connections use TLS; the
	// server name, when it names none, is each backend's host.
	TLS *tls.Config
}

// String describes c without its password, so a Config may be logged.
func (c Config) String() string {
	return "router.Config{primary=" + c.Primary + " replicas=" + "[" + strings.Join(c.Replicas, ",") + "]" +
		" max_lag=" + c.MaxLag.String() + " interval=" + c.HealthInterval.String() +
		" user=" + c.User + "}"
}

// normalized returns c with defaults filled in and the replica list
// deduplicated. The Replicas slice is a fresh copy.
func (c Config) normalized() Config {
	if c.MaxLag <= 0 {
		c.MaxLag = DefaultMaxLag
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	seen := make(map[string]bool, len(c.Replicas))
	reps := make([]string, 0, len(c.Replicas))
	for _, a := range c.Replicas {
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		reps = append(reps, a)
	}
	c.Replicas = reps
	return c
}

// dialSettings are the Config fields a monitoring connection is built from;
// a change of any of them reopens the connection.
type dialSettings struct {
	user, password               string
	connectTimeout, queryTimeout time.Duration
	tls                          *tls.Config
}

func (c Config) dial() dialSettings {
	return dialSettings{c.User, c.Password, c.ConnectTimeout, c.QueryTimeout, c.TLS}
}

// checkTimeout bounds one whole check: a connect and up to two statements.
func (c Config) checkTimeout() time.Duration { return c.ConnectTimeout + 2*c.QueryTimeout }
