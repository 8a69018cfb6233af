package proxy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// Results of lockproxy_rewrites_total (docs/metrics.md).
const (
	rewriteApplied    = "applied"
	rewriteSkipped    = "skipped"
	rewriteConflicted = "conflicted"
	rewriteUnpaired   = "unpaired"
)

// rewriteResults are every result label value, created at load so that
// each shows as 0 before it first happens.
var rewriteResults = []string{rewriteApplied, rewriteSkipped, rewriteConflicted, rewriteUnpaired}

// rewriteStep is what a rewrite rule asks of one command: watch a keyed
// SELECT's row for the guarded column, send an UPDATE in its guarded form
// instead of as written, or refuse an unpaired UPDATE.
type rewriteStep struct {
	capture *capture
	scope   string // the rule's rewrite.scope, for a capture
	sql     string // the guarded UPDATE, when it applies
	guard   string // what its guard tests (parser.Guard*)
	check   string // the locking read of the guard (parser.Guarded.Check)
	rule    string
	mode    string
	column  string
	min     string
	key     string // the row an UPDATE writes (its belief is consumed)
	zero    bool   // on_conflict: zero_rows
	reject  error  // on_unpaired: reject, for an unpaired write
	// fenced is the guarded UPDATE fenced in the same pass, when the
	// table's fence rule applies (update empty otherwise).
	fenced fenceStep
}

// planRewrite decides the rewrite step for an analysed command (params:
// execute-time values, nil for text). Only single-statement commands on a
// rewrite rule's table take part.
//
// What the session remembers, exactly: the value of the guarded column
// from the last single-row result of a SELECT that names one row of the
// table by its key (text or prepared). With rewrite.scope transaction
// (the default) only a read inside a transaction (BEGIN, or autocommit
// off) is remembered, and it is forgotten when that transaction ends: at
// COMMIT, ROLLBACK (also to a savepoint), BEGIN, a statement that commits
// implicitly, a rollback lockproxy makes, and before any command that
// runs outside a transaction. With scope session a read in or out of a
// transaction is remembered, from the primary or a replica. Either way a
// later keyed read of the row replaces it (or forgets it, when its result
// cannot be used: no row or several, the column twice or NULL, an
// expression named like the column, a row too large to hold); the
// session's next UPDATE of the row consumes it, rewritten or not. Every
// remembered value is forgotten when a command may have read or written
// rows of a rewrite rule's table otherwise (several rows, a range, a
// join, a view, a stored routine or function, also one a keyed read
// calls, a multi-row UPDATE, a DELETE, text lockproxy cannot parse), at
// COM_RESET_CONNECTION, COM_CHANGE_USER and disconnect, and when more
// than 1024 rows are remembered.
func (r *rewriterState) planRewrite(env rewriteEnv, x *exchange, pl plan, params []any, binary bool) rewriteStep {
	an := pl.an
	x.rw, x.rwConflict = nil, false
	if an == nil || !env.srv.hasRewrites() {
		return rewriteStep{}
	}
	r.scopeBeliefs(an, env.inTxn)
	if step, ok := r.stepFor(env, x, pl, params, binary); ok {
		return step
	}
	r.forgetOthers(pl)
	return rewriteStep{}
}

// stepFor is planRewrite's step for a command that is one keyed
// SELECT or one UPDATE of a rewrite rule's table; ok is false for every
// other command.
func (r *rewriterState) stepFor(env rewriteEnv, x *exchange, pl plan, params []any, binary bool) (rewriteStep, bool) {
	an := pl.an
	if an.Unparsed || len(an.Stmts) != 1 {
		return rewriteStep{}, false
	}
	f := an.Stmts[0]
	rule, keys := pl.rewrite.rule, pl.rewrite.keys
	if rule == nil {
		return rewriteStep{}, false
	}
	switch {
	case f.Kind == parser.KindSelect && len(keys) == 1:
		if pl.storedCode {
			clear(r.beliefs) // a function in it may show other rows too
		}
		return rewriteStep{capture: newCapture(keys[0].Name, rule.Rewrite.Column, binary), scope: rule.Rewrite.Scope}, true
	case f.Kind != parser.KindUpdate:
		return rewriteStep{}, false
	}
	step := r.planUpdate(env, f, rule, keys, params, env.txn.fenceFor(pl))
	x.rw = &step
	if step.key == "" { // several rows: none of them is paired
		r.forgetOthers(pl)
	}
	return step, true
}

// longDataStep is the rewrite step of an execute whose parameters went
// partly by COM_STMT_SEND_LONG_DATA: it is never rewritten (lockproxy does
// not hold every value), so under rewrite.on_unpaired: reject an absolute
// write of the guarded column in it is refused, as the rewrite step
// refuses a form it cannot express.
func longDataStep(env rewriteEnv, pl plan) rewriteStep {
	r := pl.rewrite.rule
	if pl.an == nil || r == nil || r.Rewrite.OnUnpaired != rules.OnUnpairedReject || len(pl.an.Stmts) != 1 {
		return rewriteStep{}
	}
	f := pl.an.Stmts[0]
	if f.Kind != parser.KindUpdate || !absoluteWrite(f, r.Rewrite.Column) {
		return rewriteStep{}
	}
	env.srv.unrewritableRefused(env.id, env.user, r.Name, "", "long data", f)
	return rewriteStep{rule: r.Name, reject: errorf(errRejected,
		"rule %q: UPDATE sets %s with parameters sent as long data, which lockproxy does not rewrite (rewrite.on_unpaired: reject)",
		r.Name, r.Rewrite.Column)}
}

// unrewritableRefused counts and audits an UPDATE that on_unpaired: reject
// refuses because no rewrite makes it conditional (the statement's shape
// only, never its values).
func (s *Server) unrewritableRefused(id uint32, user, rule, key, reason string, f *parser.Facts) {
	s.metrics.rejects.WithLabelValues(rule, "unpaired").Inc()
	s.audit.Info("unrewritable write refused (on_unpaired: reject)",
		zap.String("rule", rule), zap.String("key", key), zap.String("reason", reason),
		zap.String("statement", parser.Redact(f.Text)), zap.Uint32("session", id), zap.String("user", user))
}

// absoluteWrite reports whether an UPDATE sets column to anything but
// column + delta / column - delta.
func absoluteWrite(f *parser.Facts, column string) bool {
	column = strings.ToLower(column)
	return slices.ContainsFunc(f.Assignments, func(a parser.Assignment) bool {
		return a.Column == column && a.Kind != parser.AssignRelative
	})
}

// forgetOthers forgets every remembered value when a command other than
// the keyed read or UPDATE a rewrite pairs may have read or written rows
// of a rewrite rule's table (plan.rewriteRows): a read of several rows, a
// join, a view, a routine, a multi-row UPDATE, a DELETE, text lockproxy
// cannot read. The application may now believe other values than the
// ones remembered, and a rewrite from those would write the wrong
// difference; its next absolute write is unpaired instead.
func (r *rewriterState) forgetOthers(pl plan) {
	if pl.rewriteRows {
		clear(r.beliefs)
	}
}

// rewriteEnv is what the rewriter reads of the session for one command:
// the session (id, user) and its state, the transaction's locks (for a
// fence token), and where it counts and logs.
type rewriteEnv struct {
	srv         *Server
	log         *zap.Logger
	txn         *txnLocks
	id          uint32
	user        string
	inTxn       bool // in a transaction or autocommit off
	noBackslash bool // NO_BACKSLASH_ESCAPES
	// unsafeCharset: the client character set forbids rewriting
	// (modeState.unsafe).
	unsafeCharset bool
}

// planUpdate is planRewrite for an UPDATE of a rewrite rule's table.
func (rs *rewriterState) planUpdate(env rewriteEnv, f *parser.Facts, r *rules.Rule, keys []rules.Key, params []any, fence fenceStep) rewriteStep {
	rw := r.Rewrite
	step := rewriteStep{rule: r.Name, mode: rw.Mode, column: rw.Column, zero: rw.OnConflict == rules.OnConflictZeroRows}
	// skip runs the UPDATE as sent, or refuses it when on_unpaired: reject
	// and it sets the column to a value not computed from the row's own.
	skip := func(reason string) rewriteStep {
		env.srv.rewriteSkipped(env.log, step, reason)
		if rw.OnUnpaired == rules.OnUnpairedReject && absoluteWrite(f, rw.Column) {
			env.srv.unrewritableRefused(env.id, env.user, step.rule, step.key, reason, f)
			step.reject = errorf(errRejected,
				"rule %q: UPDATE sets %s to a value lockproxy does not make conditional (%s); read the row and write it with a single-row UPDATE to a literal or placeholder in one transaction, or write %s = %s - ? (rewrite.on_unpaired: reject)",
				step.rule, step.column, reason, step.column, step.column)
		}
		return step
	}
	if len(keys) != 1 {
		return skip(parser.ReasonSeveralRows)
	}
	step.key = keys[0].Name
	if env.noBackslash || env.unsafeCharset {
		return skip("session escaping")
	}
	spec := parser.RewriteSpec{Column: rw.Column, Mode: rw.Mode, Old: rs.beliefs[step.key].value, Key: r.Key}
	if rw.Min != nil {
		spec.Min = strconv.FormatFloat(*rw.Min, 'f', -1, 64)
		step.min = spec.Min
	}
	if fence.token != 0 {
		spec.Fence, spec.FenceToken = fence.column, fence.token
	}
	if params == nil {
		params = []any{}
	}
	g, ok, reason, err := parser.RewriteGuarded(f, spec, params)
	switch {
	case err != nil:
		env.log.Warn("rewrite failed", zap.String("rule", r.Name), zap.Error(err))
		return skip("error")
	case reason == parser.ReasonNothingRemembered:
		env.srv.rewriteUnpaired(env.id, env.user, env.inTxn, &step, f, rw.OnUnpaired == rules.OnUnpairedReject)
	case !ok:
		return skip(reason)
	default:
		step.sql, step.guard, step.check = g.SQL, g.Guard, g.Check
		if g.FenceCheck != "" {
			fence.update, fence.check = g.SQL, g.FenceCheck
			step.fenced = fence
		}
	}
	return step
}

func (s *Server) rewriteSkipped(log *zap.Logger, step rewriteStep, reason string) {
	s.metrics.rewrites.WithLabelValues(step.rule, step.mode, rewriteSkipped).Inc()
	log.Debug("rewrite skipped", zap.String("rule", step.rule), zap.String("reason", reason))
}

// rewriteUnpaired counts and audits an absolute write of the guarded
// column with no value read in scope (the statement's shape only, never
// its values) and, when reject, makes the error that refuses it.
func (s *Server) rewriteUnpaired(id uint32, user string, inTxn bool, step *rewriteStep, f *parser.Facts, reject bool) {
	s.metrics.rewrites.WithLabelValues(step.rule, step.mode, rewriteUnpaired).Inc()
	event := "unpaired write: no read of the guarded column in scope; the statement runs as sent"
	if reject {
		event = "unpaired write refused (on_unpaired: reject)"
		s.metrics.rejects.WithLabelValues(step.rule, "unpaired").Inc()
		step.reject = errorf(errRejected,
			"rule %q key %q: UPDATE sets %s without a read of it in the same transaction; read and write the row in one transaction (rewrite.on_unpaired: reject)",
			step.rule, step.key, step.column)
	}
	s.audit.Info(event, zap.String("rule", step.rule), zap.String("key", step.key), zap.String("mode", step.mode),
		zap.String("statement", parser.Redact(f.Text)), zap.Bool("in_transaction", inTxn),
		zap.Uint32("session", id), zap.String("user", user))
}

// refuseUnpaired answers an unpaired write that on_unpaired: reject
// refuses; the statement is not run, an open transaction stays open.
func (x *statementRun) refuseUnpaired(step rewriteStep) error {
	s := x.s
	s.ex.lastOK = false
	s.rwr.forget(step.key)
	s.ex.rw = nil
	s.afterCommand()
	return s.writeErrAt(1, step.reject)
}

// finishRewrite updates the session's beliefs and the metrics m once the
// command's response (x) has been relayed; inTxn: the session is in a
// transaction.
func (r *rewriterState) finishRewrite(x *exchange, step rewriteStep, inTxn bool, m *metrics) {
	x.rw = nil
	switch {
	case step.capture != nil:
		session := step.scope == rules.ScopeSession
		if !x.lastOK || !session && !inTxn {
			return
		}
		// A read the capture could not use (the column twice, NULL, an
		// expression named like it, no row or several, a row too large
		// to hold) still showed the application the row: what was
		// remembered before no longer is what it believes, and a rewrite
		// from it would write the wrong difference.
		if v, ok := step.capture.belief(); ok {
			r.remember(step.capture.key, v, session)
		} else {
			r.forget(step.capture.key)
		}
	case step.key != "":
		r.forget(step.key)
		if step.sql == "" || !x.lastOK || x.rwConflict {
			return
		}
		m.rewrites.WithLabelValues(step.rule, step.mode, rewriteApplied).Inc()
	}
}

// initRuleMetrics creates, at 0, the series lockproxy's own labelled
// metrics will have, so dashboards and alerts see 0 rather than nothing
// before the first event: queries by route and kind, backend errors, and
// per rule its rejections, unkeyed reads, fenced writes and rewrites. It
// also forgets the ranked shapes of rules no longer in observe mode.
func (m *metrics) initRuleMetrics(cfg *rules.Config) {
	for _, route := range []string{"primary", "replica"} {
		for _, kind := range []string{"query", "execute"} {
			m.queries.WithLabelValues(route, kind)
		}
		m.backendErrors.WithLabelValues(route)
	}
	for _, r := range cfg.Rules {
		for _, reason := range []string{"unkeyed", "unavailable"} {
			m.rejects.WithLabelValues(r.Name, reason)
		}
		if r.Rewrite != nil {
			m.rejects.WithLabelValues(r.Name, "unpaired")
		}
		if slices.Contains(r.Lock, rules.LockReadInTxn) {
			m.rejects.WithLabelValues(r.Name, "not_current")
		}
		if r.Fence != "" {
			m.fenced.WithLabelValues(r.Name)
		}
		m.unkeyedReads.WithLabelValues(r.Name)
		if r.Observes() {
			for _, o := range []string{wouldLock, wouldWait, wouldRewrite} {
				m.observed.WithLabelValues(r.Name, o, "")
			}
			for _, reason := range observeReasons {
				m.observed.WithLabelValues(r.Name, wouldRefuse, reason)
			}
		}
	}
	m.shapes.keep(cfg)
	m.initRewriteMetrics(cfg)
	m.combine.init(cfg)
}

// initRewriteMetrics creates every result of lockproxy_rewrites_total for
// each rewrite rule of cfg, so a dashboard sees 0 before the first event.
func (m *metrics) initRewriteMetrics(cfg *rules.Config) {
	for _, r := range cfg.Rules {
		if r.Rewrite == nil {
			continue
		}
		for _, res := range rewriteResults {
			m.rewrites.WithLabelValues(r.Name, r.Rewrite.Mode, res)
		}
	}
}

// rewriterState is what the rewriter believes of a session: the values it
// read of guarded rows, what its SQL-level PREPARE and SET @v made known,
// and the last statement's affected rows.
type rewriterState struct {
	// beliefs are what the session believes rows hold (the command's
	// capture and guarded UPDATE are in ex).
	beliefs map[string]belief
	// dyn is what the session's SQL-level PREPARE and SET @v made known.
	dyn          dynState
	lastAffected uint64
}
