package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/router"
	"go.uber.org/zap"
)

// gtidWait bounds how long a replica may take to catch up with the
// session's last write before the read goes to the primary instead.
const gtidWait = 50 * time.Millisecond

// replicaState is the session's view of its replica connection.
type replicaState struct {
	conn  *backendConn
	run   *replicaRun // conn as KILL finds it while a command runs on it
	db    string      // current database on conn
	sets  int         // how many of routeState.sets conn has replayed
	stmts map[uint32]uint32
	typed map[uint32]bool // statements conn has been given parameter types for
	// shared are the statements of stmts that conn keeps for every
	// session lent it (backendConn.stmts), which the session never
	// closes; dirty: conn holds something of the session's (a statement
	// it does not keep so), so it is reset when given back.
	shared map[uint32]bool
	dirty  bool
}

// replicaEligible reports whether an analysed command may be served by a
// replica: autocommit plain SELECTs with no locking clause,
// no session effects, no hint, no rule forcing the primary, no lock keys,
// outside any transaction, in a session with no temporary tables.
func (r *routeState) replicaEligible(srv *Server, be *backendConn, inTxn bool, p plan) bool {
	if srv.loaded().router == nil || p.an == nil || inTxn || r.pinnedPrimary || r.nextTxnPrimary {
		return false
	}
	if be != nil && be.optionSet {
		return false // COM_SET_OPTION changed what the primary's connection accepts, not the replica's
	}
	return p.primaryWhy == ""
}

// primaryReason says why a statement must run on the primary whatever the
// session's state, or "" when it is a plain read a replica may serve: one
// provably free of effects (parser.Facts.Impure, rules.ViewImpure),
// session effects and locks.
func primaryReason(an *parser.Analysis, g guard, env planEnv) string {
	switch {
	case an.Unparsed:
		return "not parsed"
	case an.Uncertain != "":
		return "uncertain analysis: " + an.Uncertain
	case an.PrimaryHint:
		return "lockproxy:primary hint"
	case g.primary:
		return "rule " + g.rule + " routes to the primary"
	case len(g.keys) > 0:
		return "takes row locks"
	case len(an.Stmts) == 0:
		return "no statement"
	}
	for _, f := range an.Stmts {
		switch {
		case f.Kind != parser.KindSelect:
			return string(f.Kind) + " statement"
		case f.Lock.Mode != parser.LockNone:
			return "locking read"
		case f.Effects.Any():
			return "session effects"
		case f.Impure != "":
			return f.Impure
		}
		if why := env.rs.ViewImpure(f, env.db); why != "" {
			return why
		}
	}
	return ""
}

// onReplica runs the statement, a read, on a replica and reports whether
// it did; false means the caller must run it on the primary (nothing was
// sent to the client yet).
func (x *statementRun) onReplica() (served bool, err error) {
	s, p, st := x.s, x.r.p, x.r.st
	if s.primaryGone() {
		return true, errPrimaryGone // the session is over; see gone.go
	}
	if s.client.passed {
		// Its login was the client's answer to the primary: no replica
		// connection can log in as its account.
		return false, nil
	}
	if st != nil && st.db != s.reading.db {
		// Its text names tables of the database it was prepared in,
		// which a replica connection, in the session's, would read
		// otherwise: the primary's copy reads them.
		return false, nil
	}
	if !s.srv.config().Backends.RYW() {
		s.route.needGTID, s.route.lastGTID = false, ""
	}
	if s.route.needGTID {
		if err := s.route.learnLastGTID(s.be); err != nil {
			return false, nil
		}
	}
	addr, release, ok := s.srv.loaded().router.PickAndTrack()
	if !ok {
		return false, nil
	}
	defer release()
	env := s.routeEnv()
	held := s.route.replica.conn
	rc, err := s.route.replicaConn(env, s.client.backendKey(s.srv, s.user, s.reading.db), addr)
	if errors.Is(err, errPoolExhausted) {
		return false, nil // the replica is busy, not broken
	}
	if err != nil {
		s.route.replicaBroken(s.srv, s.log, addr, err)
		return false, nil
	}
	if !s.route.caughtUp(env, rc, addr) {
		return false, nil
	}
	if st != nil {
		if p, err = s.route.replicaExecute(rc, p, st); err != nil {
			s.route.replicaBroken(s.srv, s.log, addr, err)
			return false, nil
		}
	}
	refused := false
	err = x.relayReplicaIf(rc, p, st != nil, func() (bool, error) {
		refused, err = s.srv.writeRefused(s.log, rc, p)
		return !refused, err
	})
	if refused {
		return false, nil
	}
	if err != nil {
		if _, ok := err.(clientIOError); ok || s.ex.midResponse {
			rc.broken = true
			return true, err
		}
		s.route.replicaBroken(s.srv, s.log, addr, err)
		return false, nil
	}
	s.route.diagReplica, s.route.readNow = true, true
	s.route.readKept = rc == held && keepsReplicaDiagnostics(x.r.an, s.ex.lastOK, s.ex.raised)
	s.srv.metrics.queries.WithLabelValues("replica", kindLabel(st)).Inc()
	return true, nil
}

// relayReplicaIf sends a command to the session's replica connection rc
// and relays its answer to the client, when check is nil or, having read
// the answer's first packet, says so; KILL finds the command meanwhile
// (onReplicaNow). A failure to write to the client is a clientIOError.
func (x *statementRun) relayReplicaIf(rc *backendConn, p []byte, binary bool, check func() (bool, error)) error {
	s := x.s
	if err := s.cw.flush(); err != nil {
		return clientIOError{err}
	}
	s.pub.onReplicaNow.Store(s.route.replica.run)
	defer s.pub.onReplicaNow.Store(nil)
	if err := rc.writeCommand(p); err != nil {
		return err
	}
	if check != nil {
		if ok, err := check(); !ok || err != nil {
			return err
		}
	}
	s.ex.src = rc
	return s.relay(relayResults, binary)
}

// caughtUp reports whether the replica connection rc has applied what the
// session's reads must see (read_your_writes: its own last write, or the
// mark of its user or of everyone), waiting up to gtidWait; false sends
// the read to the primary.
func (r *routeState) caughtUp(env routeEnv, rc *backendConn, addr string) bool {
	want := env.srv.marks.want(env.srv.config().Backends.ReadYourWrites, env.user, r.lastGTID)
	if want == "" || r.reachedAt == addr && r.reached == want {
		return true
	}
	q := router.WaitGTIDQuery(want, gtidWait)
	if q == "" {
		return false // a GTID that does not parse
	}
	v, err := rc.queryValue(q)
	if err != nil {
		r.replicaBroken(env.srv, env.log, addr, err)
		return false
	}
	if string(v) != "0" {
		return false // not caught up within gtidWait
	}
	r.reachedAt, r.reached = addr, want
	return true
}

// writeRefused reads the replica's answer to p far enough to tell whether
// it is MariaDB refusing a write in the replica's read-only session
// (1792): a read lockproxy let through had a side effect it failed to see,
// which is a routing bug. Such an answer is consumed, counted and logged,
// and the caller runs the command on the primary: the statement failed on
// the replica as a whole and the client has seen nothing of it.
func (s *Server) writeRefused(log *zap.Logger, rc *backendConn, p []byte) (bool, error) {
	h, err := rc.r.r.Peek(7)
	if err != nil {
		return false, err
	}
	if h[4] != mysql.ERR_HEADER || binary.LittleEndian.Uint16(h[5:]) != mysql.ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION {
		return false, nil
	}
	if _, err := rc.read(); err != nil {
		return false, err
	}
	s.metrics.replicaWriteRefused.Inc()
	q := ""
	if p[0] == mysql.COM_QUERY {
		q = parser.Redact(string(p[1:]))
	}
	log.Error("a replica refused a write from a read lockproxy routed to it; running it on the primary (a routing bug: please report it)",
		zap.String("replica", rc.key.addr), zap.String("statement", q))
	return true, nil
}

func kindLabel(st *stmt) string {
	if st != nil {
		return "execute"
	}
	return "query"
}

// replicaBroken drops the session's replica connection and tells the
// router, so the next reads go elsewhere until its health check passes.
func (r *routeState) replicaBroken(srv *Server, log *zap.Logger, addr string, err error) {
	log.Debug("replica unusable; reading from the primary", zap.String("replica", addr), zap.Error(err))
	srv.metrics.backendErrors.WithLabelValues("replica").Inc()
	if !isMySQLErr(err) && !errors.Is(err, errPoolExhausted) {
		if rt := srv.loaded().router; rt != nil {
			rt.MarkDown(addr, err)
		}
	}
	if r.replica.conn != nil {
		r.replica.conn.broken = true
		srv.pool.put(r.replica.conn)
	}
	r.replica = replicaState{}
	r.diagReplica, r.replicaLeft = false, false
}

func isMySQLErr(err error) bool {
	_, ok := err.(*sqlError)
	return ok
}

// routeEnv is what routing reads of the session: the server, the log,
// the user (read-your-writes marks), the database, the context that ends
// when lockproxy stops for good, and whether the session multiplexes.
type routeEnv struct {
	srv      *Server
	log      *zap.Logger
	user, db string
	ctx      context.Context
	mux      bool
}

// routeEnv is the session's routeEnv.
func (s *session) routeEnv() routeEnv {
	return routeEnv{srv: s.srv, log: s.log, user: s.user, db: s.reading.db, ctx: s.hardCtx, mux: s.mux.on}
}

// replicaConn returns the session's connection to addr, logging in as
// the session's primary connections do (key) with the session's
// database and SET statements applied. A session that does not
// multiplex keeps its connection to the replica it last read from for
// its life; one that multiplexes borrows one of the pool's, logged in to
// its current database, for the read (giveBackReplica).
func (r *routeState) replicaConn(env routeEnv, key poolKey, addr string) (*backendConn, error) {
	if c := r.replica.conn; c != nil && (c.key.addr != addr || env.mux && r.replica.db != env.db) {
		r.giveBackReplica(env.srv.pool)
	}
	if r.replica.conn == nil {
		key.addr, key.db, key.readOnly, key.track = addr, "", true, false
		if env.mux {
			// The login was judged (pinBackend); the connection is the
			// pool's, in the session's database, as the primary's are.
			key.db = env.db
		}
		b, err := env.srv.pool.take(env.ctx, key, env.mux, dialTimeout)
		if err != nil {
			return nil, err
		}
		b.dbDirty = !env.mux
		r.replica = replicaState{conn: b, run: &replicaRun{addr: addr, thread: b.threadID, nc: b.nc}, db: key.db,
			stmts: map[uint32]uint32{}, typed: map[uint32]bool{}, shared: map[uint32]bool{}}
	}
	rc := r.replica.conn
	if r.replica.db != env.db && env.db != "" {
		if err := rc.simpleCommand(append([]byte{mysql.COM_INIT_DB}, env.db...)); err != nil {
			return nil, err
		}
		r.replica.db = env.db
	}
	for ; r.replica.sets < len(r.sets); r.replica.sets++ {
		r.replica.dirty = true
		if _, err := rc.queryValue(r.sets[r.replica.sets]); err != nil && err != errNoRow {
			return nil, err
		}
	}
	return rc, nil
}

// giveBackReplica gives the session's replica connection back to the
// pool: kept as it is when it holds nothing of the session's (no
// warnings either), else reset first (in the background), or closed
// when it cannot be.
func (r *routeState) giveBackReplica(p *pool) {
	rc := r.replica.conn
	switch {
	case rc == nil:
		return
	case r.replica.dirty || r.replicaLeft || rc.dbDirty || rc.optionSet || rc.broken || len(rc.pre) > 0:
		p.put(rc)
	default:
		p.keep(rc)
	}
	r.replica, r.replicaLeft = replicaState{}, false
}

// settleReplica, after a command of a multiplexing session, gives its
// replica connection back unless the client may still read the
// diagnostics the last read left there: warnings or an error
// (replicaLeft), or, while the session holds a primary connection, even
// none, since that connection's diagnostics are not the read's. A session
// holding neither reads empty diagnostics from the next connection it
// borrows, which every connection is given back with.
func (r *routeState) settleReplica(p *pool, holdsPrimary bool) {
	if r.replica.conn != nil && !(r.diagReplica && (r.replicaLeft || holdsPrimary)) {
		r.giveBackReplica(p)
	}
}

// replicaExecute prepares st on the replica connection if needed and
// returns the execute packet addressed to it, with parameter types bound
// when the replica's statement has never been given them.
func (r *routeState) replicaExecute(rc *backendConn, p []byte, st *stmt) ([]byte, error) {
	id, ok := r.replica.stmts[st.id]
	if !ok {
		var err error
		if id, err = r.replicaPrepare(rc, st); err != nil {
			return nil, err
		}
		r.replica.stmts[st.id] = id
	}
	out := append([]byte(nil), p...)
	binary.LittleEndian.PutUint32(out[1:], id)
	if st.numParams > 0 && !r.replica.typed[st.id] {
		var err error
		if out, err = withParamTypes(out, st.numParams, st.paramTypes); err != nil {
			return nil, err
		}
		r.replica.typed[st.id] = true
	}
	return out, nil
}

// replicaPrepare gives st a statement on rc: under multiplexing, one rc
// keeps of its text for every session lent it, when rc is in its pool's
// state (its login's database, no SET replayed), else one prepared there
// and kept so when it can be (as a primary connection's: pool_stmt.go);
// otherwise one of the session's own.
func (r *routeState) replicaPrepare(rc *backendConn, st *stmt) (uint32, error) {
	pooled := !rc.dbDirty && r.replica.db == rc.key.db && r.replica.sets == 0
	if cs, ok := rc.stmts[connStmtKey{rc.key.db, st.query}]; ok && pooled && cs.params == st.numParams {
		r.replica.shared[st.id] = true
		return cs.id, nil
	}
	id, params, err := rc.prepareCounted(st.query)
	switch {
	case err != nil:
		return 0, err
	case pooled && params == st.numParams && rc.shareStmt(rc.key.db, st.query, id, params):
		r.replica.shared[st.id] = true
	default:
		r.replica.dirty = true
	}
	return id, nil
}

// learnLastGTID asks the primary for the GTID of the session's last write,
// which a replica must have applied before it may serve the session.
func (r *routeState) learnLastGTID(be *backendConn) error {
	v, err := be.queryValue("SELECT @@last_gtid")
	if err != nil {
		if err != errNoRow && !isMySQLErr(err) {
			be.broken = true
		}
		return err
	}
	r.needGTID = false
	if g := string(v); g != "" {
		r.lastGTID = g
	}
	return nil
}

// noteStatement records what a statement run on the primary means for
// later routing: writes need read-your-writes, SETs are replayed on
// replica connections (those with a computed value as the value the
// primary computed: replaySet), temporary tables and what may create one
// unseen (CALL, EXECUTE, dynamic SQL the parser rejected) pin the session
// to the primary.
func (r *routeState) noteStatement(env routeEnv, be *backendConn, an *parser.Analysis) {
	if env.srv.loaded().router == nil || an == nil {
		return
	}
	if an.Unparsed {
		r.needGTID = true
		if env.srv.mayCreateTemporary(an, env.db) {
			r.pinnedPrimary = true
		}
		return
	}
	var computed []*parser.Facts
	rs := env.srv.ruleSet()
	for _, f := range an.Stmts {
		if rs.MayCreateTemporary(f, env.db) {
			// A stored function, procedure or trigger may have made a
			// temporary table (MariaDB allows CREATE TEMPORARY TABLE in
			// each), which only the primary's connection has.
			r.pinnedPrimary = true
		}
		switch f.Kind {
		case parser.KindSelect, parser.KindShow, parser.KindExplain, parser.KindUse:
			r.nextTxnPrimary = false
		case parser.KindSet:
			switch {
			case f.Effects.SetTransaction && f.Effects.SetTransactionScope == "next":
				// The next transaction's characteristics live on the
				// primary's connection only: that transaction runs there.
				r.nextTxnPrimary = true
			case sessionTransaction(f):
				computed = append(computed, f)
			case !replayable(f):
			case f.Effects.SetComputed:
				computed = append(computed, f)
			default:
				r.sets = append(r.sets, f.Text)
			}
		case parser.KindDDL:
			if strings.Contains(strings.ToLower(f.Text), "temporary") {
				r.pinnedPrimary = true
			}
			r.needGTID = true
		case parser.KindLockTables, parser.KindCall, parser.KindExecute:
			// A procedure or a prepared statement may create a temporary
			// table or change the session's variables where lockproxy
			// cannot see it.
			r.pinnedPrimary = true
			r.needGTID = true
		default:
			r.needGTID = true
		}
		if f.Kind != parser.KindSet && f.Kind != parser.KindSelect {
			r.nextTxnPrimary = false
		}
	}
	if len(computed) > 0 {
		r.replaySet(be, env.log, computed)
	}
}

// dropReplica gives the replica connection back (session end, reset,
// change of user).
func (r *routeState) dropReplica(pool *pool) {
	if r.replica.conn != nil {
		pool.put(r.replica.conn)
	}
	r.replica = replicaState{}
	r.diagReplica, r.replicaLeft = false, false
	r.sets = nil
	r.lastGTID, r.needGTID, r.pinnedPrimary, r.nextTxnPrimary = "", false, false, false
}

// mayCreateTemporary reports whether a text the parser could not read may
// have made a temporary table (CREATE TEMPORARY TABLE with a type the
// parser does not know, CREATE OR REPLACE TEMPORARY TABLE, CREATE
// TEMPORARY SEQUENCE, dynamic SQL, stored code that may:
// rules.RuleSet.MayCreateTemporaryText).
func (s *Server) mayCreateTemporary(an *parser.Analysis, db string) bool {
	if parser.ShowDiagnostics(an.SQL, an.Mode) {
		return false
	}
	return parser.HasDynamicSQL(an.SQL) || s.ruleSet().MayCreateTemporaryText(an.SQL, db)
}

// routeState is what routing keeps of a session: its replica connection
// and the SETs to replay there, what read-your-writes needs, and what has
// pinned the session's reads to the primary.
type routeState struct {
	// Routing: the replica connection, SETs to replay on it, and what
	// read-your-writes needs.
	replica       replicaState
	sets          []string
	lastGTID      string
	needGTID      bool
	pinnedPrimary bool
	// nextTxnPrimary: SET TRANSACTION without a scope set the next
	// transaction's characteristics, on the primary's connection.
	nextTxnPrimary bool
	// diagReplica: the session's diagnostics area (SHOW WARNINGS) is
	// its replica connection's, which served the last statement;
	// diagPrev is what diagReplica was before the command being served
	// (beginCommand); replicaLeft: that statement left warnings or an
	// error there (kept under multiplexing: settleReplica); readNow: a
	// replica served the command being served, and readKept: on the
	// connection that served the one before, leaving its diagnostics
	// area as it was (keepsReplicaDiagnostics).
	diagReplica, diagPrev, replicaLeft, readNow, readKept bool
	// diagLost: lockproxy ran a statement of its own after the client's
	// last one on the same connection (a rewrite's check), which replaced
	// that statement's warnings there; lostPrev is what it was before
	// the command being served (beginCommand).
	diagLost, lostPrev bool
	// reached is the last GTID the replica reachedAt is known to have
	// applied (MASTER_GTID_WAIT answers for the server, whichever
	// connection asks).
	reachedAt, reached string
}
