package proxy

import "github.com/prometheus/client_golang/prometheus"

// metrics are the proxy's own series (docs/metrics.md), registered on the
// registry the Server is given.
type metrics struct {
	connections   prometheus.Gauge
	queries       *prometheus.CounterVec
	backendErrors *prometheus.CounterVec
	authFailures  prometheus.Counter
	rejected      prometheus.Counter
	rejects       *prometheus.CounterVec
	rewrites      *prometheus.CounterVec
	fenced        *prometheus.CounterVec
	unkeyedReads  *prometheus.CounterVec
	observed      *prometheus.CounterVec
	// shapes ranks the statement shapes observing rules would have
	// refused or made wait (lockproxy_observed_top_shapes).
	shapes *topShapes
	// replicaWriteRefused counts reads a replica's read-only session
	// refused as writes (routing.go writeRefused).
	replicaWriteRefused prometheus.Counter
	// schemaWords counts DDL announcements through the lock service:
	// sent, failed (not sent), heard (another instance's).
	schemaWords                            *prometheus.CounterVec
	schemaSent, schemaNotSent, schemaHeard prometheus.Counter

	// Hostile clients: connections authenticating and those closed to
	// make room, accept failures, commands refused for memory, logins
	// refused by the throttle.
	handshakes        prometheus.Gauge
	handshakesEvicted prometheus.Counter
	acceptErrors      prometheus.Counter
	memoryRefused     prometheus.Counter
	loginsThrottled   prometheus.Counter
	// accountReads counts reads of the primary's accounts
	// (users.from_backend) by result.
	accountReads *prometheus.CounterVec

	// Hot-path children of queries, resolved once.
	primaryQuery, primaryExecute prometheus.Counter

	// combine are hot-row combining's series (combine_metrics.go).
	combine combineMetrics
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockproxy_client_connections",
			Help: "Client connections currently open.",
		}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_queries_total",
			Help: "Statements sent to a backend, by route (primary|replica) and kind.",
		}, []string{"route", "kind"}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_backend_errors_total",
			Help: "Failures to connect to or talk to a backend server.",
		}, []string{"backend"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockproxy_auth_failures_total",
			Help: "Client logins refused for a bad user or password.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockproxy_connections_rejected_total",
			Help: "Client connections refused because max_connections was reached.",
		}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_statements_rejected_total",
			Help: "Statements lockproxy refused to run, by rule and reason (unkeyed|unavailable|unpaired).",
		}, []string{"rule", "reason"}),
		rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_rewrites_total",
			Help: "Read-then-write UPDATEs by rule, mode and result (applied|skipped|conflicted|unpaired).",
		}, []string{"rule", "mode", "result"}),
	}
	m.fenced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockproxy_fenced_writes_total",
		Help: "Locked UPDATEs refused by the database because the row carried a newer fencing token; each rolled its transaction back.",
	}, []string{"rule"})
	m.unkeyedReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockproxy_unkeyed_reads_total",
		Help: "Plain reads inside a transaction whose rows could not be keyed and that ran without row locks (on_unkeyed_read: allow), by rule.",
	}, []string{"rule"})
	m.observed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockproxy_observed_total",
		Help: "What rules in observe mode would have done to statements that ran untouched, by rule, outcome (would_lock|would_wait|would_refuse|would_rewrite) and, for would_refuse, reason.",
	}, []string{"rule", "outcome", "reason"})
	m.shapes = newTopShapes()
	m.replicaWriteRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockproxy_replica_write_refused_total",
		Help: "Reads routed to a replica that its read-only session refused as writes (error 1792), each then run on the primary; any rise is a routing bug.",
	})
	m.handshakes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lockproxy_client_handshakes",
		Help: "Client connections still authenticating (bounded by proxy.max_handshakes).",
	})
	m.handshakesEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockproxy_handshakes_evicted_total",
		Help: "Connections closed while authenticating to make room for newer ones (proxy.max_handshakes, or out of file descriptors).",
	})
	m.acceptErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockproxy_accept_errors_total",
		Help: "Failed accepts (such as EMFILE) after which the listener backed off and went on.",
	})
	m.memoryRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockproxy_memory_refusals_total",
		Help: "Commands answered with 1041 because proxy.session_memory or proxy.memory_budget had no room.",
	})
	m.loginsThrottled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockproxy_logins_throttled_total",
		Help: "Login attempts refused (1129) unchecked because recent failed logins hold every slot of their account or address.",
	})
	m.schemaWords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockproxy_schema_announcements_total",
		Help: "DDL announcements through the lock service, by event: sent (DDL ran here), failed (could not be sent; the others see the DDL at their next schema_refresh), heard (another instance's; the schema was read again at once).",
	}, []string{"event"})
	m.schemaSent = m.schemaWords.WithLabelValues("sent")
	m.schemaNotSent = m.schemaWords.WithLabelValues("failed")
	m.schemaHeard = m.schemaWords.WithLabelValues("heard")
	m.accountReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockproxy_account_reads_total",
		Help: "Reads of the primary's accounts for users.from_backend (at start, on reload, after failed logins), by result (success|failure).",
	}, []string{"result"})
	m.combine = newCombineMetrics(reg)
	m.primaryQuery = m.queries.WithLabelValues("primary", "query")
	m.primaryExecute = m.queries.WithLabelValues("primary", "execute")
	if reg != nil {
		reg.MustRegister(m.connections, m.queries, m.backendErrors, m.authFailures, m.rejected, m.rejects, m.rewrites, m.fenced, m.unkeyedReads, m.observed, m.shapes, m.replicaWriteRefused,
			m.schemaWords,
			m.handshakes, m.handshakesEvicted, m.acceptErrors, m.memoryRefused, m.loginsThrottled)
		reg.MustRegister(m.accountReads)
	}
	return m
}
