package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/router"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// textShapesSize bounds Server.textShapes.
const textShapesSize = 1024

// Options configure a Server beyond rules.yaml.
type Options struct {
	Logger   *zap.Logger           // nil: no logging
	Registry prometheus.Registerer // nil: metrics are kept but not exported
	// AuthPlugin is the plugin announced to clients: mysql_native_password
	// (default) or caching_sha2_password. Answers in either are accepted.
	AuthPlugin string
	// Locker grants row locks; nil runs without locking (rules then only
	// route and reject).
	Locker lockmgr.Locker
	// Instance names this proxy process among all that share the Locker.
	Instance string
}

// Server accepts MySQL client connections and serves each in a session of
// its own. Its methods are safe for concurrent use.
type Server struct {
	// rt is what the configuration in force built; Reload swaps it whole.
	rt         atomic.Pointer[loaded]
	log        *zap.Logger
	audit      *zap.Logger // lock waits over slow_wait, victims, rejections, rewrite conflicts
	metrics    *metrics
	pool       *pool
	logins     *loginThrottle
	accounts   *accountBook // the primary's accounts (users.from_backend)
	authPlugin string
	authKey    authKey      // RSA key for caching_sha2_password without TLS
	version    atomic.Value // string
	// backendExt: the primary's extended capabilities in the low 32
	// bits, bit 32 set once they are known (noteBackendExtCaps).
	backendExt atomic.Uint64
	locker     lockmgr.Locker
	// schemaReads are the schema reads after DDL (run here or announced
	// by another instance) still running: statements planned meanwhile
	// wait for them.
	schemaReads schemaReads
	instance    string
	analyzer    *parser.Cache
	// textShapes are the statement shapes whose plan needs the text itself
	// (a rewrite or fence target) under the rule set they were planned
	// with: their texts are analysed as they are, without planning the
	// shape first. At most textShapesSize: rewrite and fence rules guard
	// few tables, and each entry keeps its analysis alive.
	textShapes *lru.Cache[*parser.Analysis, *rules.RuleSet]
	// marks are the GTIDs written through this instance, for
	// backends.read_your_writes user and global.
	marks      writeMarks
	reg        prometheus.Registerer
	started    time.Time
	hardCtx    context.Context // cancelled when the shutdown grace ends
	hardCancel context.CancelFunc

	// unforeseen makes sessions forget, between commands, which of their
	// statements may have changed the session's state (plan.changesMode),
	// so that only the server's own reports (sessiontrack.go) make them
	// read it again: tests set it to show those reports suffice.
	unforeseen atomic.Bool

	// mem is the process's memory budget for what clients make lockproxy
	// hold (proxy.memory_budget); see memory.go.
	mem *memBudget

	// texts are the connections text keys are asked through.
	texts textServers

	// combine queues the combinable UPDATEs of hot rows (combine.go).
	combine combiner

	// reloadMu orders the swaps of rt (Reload and schema refreshes).
	reloadMu sync.Mutex

	mu       sync.Mutex
	ln       net.Listener
	sessions map[uint32]*session
	// handshaking are the sessions of sessions still authenticating
	// (proxy.max_handshakes); they do not count against max_connections.
	handshaking map[uint32]*session
	// admitted counts the sessions that logged in and have not ended:
	// what max_connections bounds. A session closed while authenticating
	// (evicted) leaves handshaking at once but sessions only when its
	// goroutine ends, so the two maps' difference would count it.
	admitted int
	// memReturn gives ended sessions' memory back to the system.
	memReturn *memReturn
	// releasers run the sessions' background lock releases.
	releasers *releasers
	// lockSvc is what every session's locks share (guard.go).
	lockSvc  lockService
	nextID   uint32
	draining bool
	wg       sync.WaitGroup
	ctx      context.Context // cancelled when draining starts
	cancel   context.CancelFunc
}

// New builds a Server for cfg. It loads the TLS key pair when cfg names one.
func New(cfg *rules.Config, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	plugin := opts.AuthPlugin
	if plugin == "" {
		plugin = mysql.AUTH_NATIVE_PASSWORD
	}
	if !supportedPlugin(plugin) {
		return nil, errors.New("proxy: auth plugin must be mysql_native_password or caching_sha2_password")
	}
	s := &Server{
		log:         log,
		audit:       log.Named("audit"),
		metrics:     newMetrics(opts.Registry),
		pool:        newPool(),
		logins:      newLoginThrottle(),
		authPlugin:  plugin,
		sessions:    make(map[uint32]*session),
		handshaking: make(map[uint32]*session),
		memReturn:   newMemReturn(),
		releasers:   newReleasers(),
		mem:         newMemBudget(int64(cfg.Proxy.MemoryBudget)),
		locker:      opts.Locker,
		reg:         opts.Registry,
		started:     time.Now(),
		instance:    opts.Instance,
		analyzer:    parser.NewCache(analysisCacheSize),
	}
	s.accounts = newAccountBook(func(result string) { s.metrics.accountReads.WithLabelValues(result).Inc() })
	s.textShapes, _ = lru.New[*parser.Analysis, *rules.RuleSet](textShapesSize) // size > 0: no error
	if opts.Registry != nil {
		opts.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lockproxy_memory_budget_used_bytes",
			Help: "Bytes of proxy.memory_budget that client packets, long data, plans and statements being analysed hold.",
		}, func() float64 { return float64(s.mem.used.Load()) }))
	}
	if s.instance == "" {
		s.instance = newInstanceID()
	}
	s.lockSvc = lockService{locker: s.locker, releasers: s.releasers, instance: s.instance, observeInstance: s.instance + "/observe",
		log: s.log, linger: s.linger}
	s.lockSvc.observer, _ = s.locker.(lockmgr.Observer)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hardCtx, s.hardCancel = context.WithCancel(context.Background())
	if err := s.Reload(cfg); err != nil {
		return nil, err
	}
	s.pool.register(opts.Registry, func() rules.PoolConfig { return s.config().Backends.Pool })
	return s, nil
}

// loaded is everything one configuration builds: the configuration, its
// rules compiled against the primary's schema, the TLS configurations, and
// the router. It is built and validated whole, then swapped in at once
// (Reload), so a session never sees half of a reload, and never modified:
// a schema refresh swaps in a copy with new rules.
type loaded struct {
	cfg        *rules.Config
	rules      *rules.RuleSet
	clientTLS  *tls.Config    // proxy.tls; nil: clients cannot switch to TLS
	backendTLS *tls.Config    // backends.tls; nil: plain connections
	router     *router.Router // nil while no replicas were ever configured
}

// loaded returns what the configuration in force built.
func (s *Server) loaded() *loaded { return s.rt.Load() }

// Reload swaps in a new configuration. Sessions pick it up at their next
// command; open connections are not dropped. Everything the configuration
// needs is built before anything changes: a configuration that fails
// leaves the old one in force, whole.
func (s *Server) Reload(cfg *rules.Config) error {
	next := &loaded{cfg: cfg}
	if cfg.Proxy.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cfg.Proxy.TLS.Cert, cfg.Proxy.TLS.Key)
		if err != nil {
			return err
		}
		next.clientTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	btls, err := cfg.Backends.TLS.Load()
	if err != nil {
		return err
	}
	next.backendTLS = btls
	if next.rules, err = s.compileRules(cfg, btls); err != nil {
		return err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	next.router = s.routerFor(cfg, btls)
	s.rt.Store(next)
	s.metrics.initRuleMetrics(cfg)
	if s.mem != nil {
		s.mem.setLimit(int64(cfg.Proxy.MemoryBudget))
	}
	s.readAccounts(cfg, btls)
	return nil
}

// readAccounts reads the primary's accounts again when cfg serves them
// (users.from_backend). A primary that cannot be asked leaves the
// accounts read before; a failed login asks again.
func (s *Server) readAccounts(cfg *rules.Config, btls *tls.Config) {
	if !servesAccounts(cfg) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), accountsReadTimeout)
	defer cancel()
	if _, err := s.accounts.read(ctx, cfg, btls, true); err != nil {
		s.log.Warn("cannot read the accounts from the primary (users.from_backend); the accounts read before stay", zap.Error(err))
	}
}

// rereadAccounts reads the primary's accounts again unless a read began
// less than accountsRereadGap ago (then it waits for one in flight), and
// reports whether accounts newer than before are in force.
func (s *Server) rereadAccounts() bool {
	rt := s.loaded()
	ctx, cancel := context.WithTimeout(s.hardCtx, accountsReadTimeout)
	defer cancel()
	read, err := s.accounts.read(ctx, rt.cfg, rt.backendTLS, false)
	if err != nil {
		s.log.Warn("cannot read the accounts from the primary (users.from_backend); the accounts read before stay", zap.Error(err))
	}
	return read && err == nil
}

// servesAccounts reports whether cfg serves any account read from the
// primary.
func servesAccounts(cfg *rules.Config) bool {
	if cfg.UsersFromBackend {
		return true
	}
	for _, u := range cfg.Users {
		if u.FromBackend {
			return true
		}
	}
	return false
}

// routerFor hands the router in force the new backends, or makes one when
// replicas are configured for the first time. (A router, once made, stays:
// with no replicas left it simply picks none.) Called with reloadMu held.
func (s *Server) routerFor(cfg *rules.Config, btls *tls.Config) *router.Router {
	rc := router.Config{Primary: cfg.Backends.Primary, Replicas: cfg.Backends.Replicas,
		MaxLag: cfg.Backends.MaxReplicaLag.D(), TLS: btls}
	if len(cfg.Users) > 0 {
		rc.User, rc.Password = cfg.Users[0].User, cfg.Users[0].Password
	}
	var rt *router.Router
	if cur := s.loaded(); cur != nil {
		rt = cur.router
	}
	switch {
	case rt != nil:
		rt.Update(rc)
	case len(rc.Replicas) > 0:
		rt = router.New(rc, s.log.Named("router"), s.reg)
		s.mu.Lock()
		serving := s.ln != nil
		s.mu.Unlock()
		if serving {
			go rt.Start(s.ctx)
		}
	}
	return rt
}

// swapRules puts rs in force with the rest of the runtime as it is, unless
// a reload replaced the configuration rs was compiled for.
func (s *Server) swapRules(cfg *rules.Config, rs *rules.RuleSet) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cur := s.loaded()
	if cur == nil || cur.cfg != cfg {
		return
	}
	next := *cur
	next.rules = rs
	s.rt.Store(&next)
}

func (s *Server) ruleSet() *rules.RuleSet { return s.loaded().rules }

// hasRewrites reports whether any rule rewrites.
func (s *Server) hasRewrites() bool {
	for _, r := range s.config().Rules {
		if r.Rewrite != nil {
			return true
		}
	}
	return false
}

// needsFacts reports whether statements must be analysed at all.
func (s *Server) needsFacts() bool {
	cfg := s.config()
	return len(cfg.Rules) > 0 || len(cfg.Backends.Replicas) > 0
}

func (s *Server) config() *rules.Config { return s.loaded().cfg }

func (s *Server) requireTLS() bool { return s.config().Proxy.RequireTLS }

// lookupUser finds the user a client names: listed in users (known), and
// whether its account is read from the primary (relayed): listed with
// from_backend, or not listed under users.from_backend.
func (s *Server) lookupUser(name string) (u rules.User, known, relayed bool) {
	cfg := s.config()
	for _, u := range cfg.Users {
		if u.User == name {
			return u, true, u.FromBackend
		}
	}
	return rules.User{}, false, cfg.UsersFromBackend
}

// Shutdown stops accepting, lets sessions finish their open transactions
// until ctx ends, then closes what is left. Sessions outside a transaction
// end at their next command.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.closeIdleSessions()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			s.releaseLingering()
			s.closeBackends()
			s.releasers.stop()
			return nil
		case <-tick.C:
			s.closeIdleSessions()
		case <-ctx.Done():
			// The grace is over: wake every session, whether it waits on
			// its client or on a reply from its primary, and give them a
			// moment to give their locks back; then return, as net/http's
			// Shutdown does, whether or not every one has ended.
			s.hardCancel()
			s.mu.Lock()
			for _, sess := range s.sessions {
				_ = sess.conn.Close()
				if b := sess.pub.watched.Load(); b != nil {
					_ = b.nc.Close()
				}
				if r := sess.pub.onReplicaNow.Load(); r != nil {
					_ = r.nc.Close()
				}
			}
			s.mu.Unlock()
			select {
			case <-done:
			case <-time.After(shutdownStraggle):
				s.log.Warn("sessions still ending after the shutdown grace; returning without them")
			}
			s.releaseLingering()
			s.closeBackends()
			s.releasers.stop()
			return ctx.Err()
		}
	}
}

// releaseLingering gives back the row locks lingering with the instance
// (linger.go), so no other instance waits for their leases to end.
func (s *Server) releaseLingering() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	s.lockSvc.releaseLingering(ctx)
}

// linger is locks.redis.linger in force (0 unless the backend is redis:
// the section of another backend's configuration is not read).
func (s *Server) linger() time.Duration {
	if l := s.config().Locks; l.Backend == rules.LockBackendRedis && l.Redis != nil {
		return l.Redis.Linger.D()
	}
	return 0
}

// shutdownStraggle is how long Shutdown waits, once its grace is over and
// every connection is closed, for sessions to give their locks back.
const shutdownStraggle = releaseTimeout + time.Second

func (s *Server) closeBackends() {
	s.pool.close()
	s.closeTexts()
	if rt := s.loaded().router; rt != nil {
		rt.Close()
	}
}

// closeIdleSessions wakes sessions blocked reading their next command
// outside a transaction, so they end now rather than at their next command.
func (s *Server) closeIdleSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if sess.pub.idle.Load() && !sess.pub.txnOpen.Load() {
			_ = sess.conn.SetReadDeadline(time.Now())
		}
	}
}

// Addr returns the listener's address once Serve has started.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Ready reports whether the server takes new clients: it is not draining
// and the primary answers. A load balancer that checks /readyz thus stops
// sending clients as soon as SIGTERM arrives.
func (s *Server) Ready(ctx context.Context) error {
	if s.isDraining() {
		return errDraining
	}
	d := net.Dialer{}
	c, err := d.DialContext(ctx, "tcp", s.config().Backends.Primary)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	return c.Close()
}

// Grace is how long Shutdown should wait for open transactions.
func (s *Server) Grace() time.Duration { return s.config().Proxy.ShutdownGrace.D() }
