package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// Outcomes of lockproxy_observed_total: what a rule in observe mode would
// have done to a statement that lockproxy let run untouched.
const (
	wouldLock    = "would_lock"
	wouldWait    = "would_wait"
	wouldRefuse  = "would_refuse"
	wouldRewrite = "would_rewrite"
)

// Reasons of a would_refuse (the reason label): the same small fixed set
// whatever the message says.
const (
	refuseUnkeyed    = "unkeyed"
	refuseStoredCode = "stored_code"
	refuseCharset    = "charset"
	refuseDynamicSQL = "dynamic_sql"
	refuseUnpaired   = "unpaired"
	refuseNotCurrent = "not_current"
	refuseOther      = "other"
)

// observeReasons lists every reason label value, for the metric's zeros.
var observeReasons = []string{refuseUnkeyed, refuseStoredCode, refuseCharset, refuseDynamicSQL, refuseUnpaired, refuseNotCurrent, refuseOther}

// observeProbe bounds the check for another holder of an observed key: a
// statement of an observing rule is delayed by at most this, never held
// behind the other holder.
const observeProbe = 10 * time.Millisecond

// observation is what the rules in observe mode would have done to one
// command: the keys they would have locked, the refusals and rewrites they
// would have made. The plan leaves all of it undone.
type observation struct {
	keys     []lockmgr.Key
	refused  []observedRefusal
	rewrites []string // rule names
}

type observedRefusal struct {
	rule, reason, msg string
}

func (g *guard) observedPart() *observation {
	if g.seen == nil {
		g.seen = &observation{}
	}
	return g.seen
}

// add merges one decision into the guard; while some rule is in observe
// mode, what such rules ask for is set aside as observed (why: the reason
// a refusal counts under, "" for the decision's own).
func (pl *planner) add(d rules.Decision, why string) {
	g := &pl.p.guard
	if g.observing {
		d = g.observeDecision(d, why)
	}
	g.add(d, pl.lc)
}

// rewriteObserved records a rewrite a rule in observe mode would have made.
func (g *guard) rewriteObserved(rule string) {
	seen := g.observedPart()
	seen.rewrites = append(seen.rewrites, rule)
}

// observeDecision takes out of d what its rules in observe mode ask for
// (their keys; a refusal only they make) and records it in the guard; the
// rest of d is enforced as usual. why is the would_refuse reason, ""
// for the decision's own (unkeyed, or stored_code for hidden writes).
func (g *guard) observeDecision(d rules.Decision, why string) rules.Decision {
	if d.Rule == nil {
		return d
	}
	if d.Reject {
		d = g.observeRefusal(d, why)
	}
	if !slices.ContainsFunc(d.Keys, func(k rules.Key) bool { return keyObserved(d, k) }) {
		return d
	}
	seen := g.observedPart()
	var kept []rules.Key
	for _, k := range d.Keys {
		if keyObserved(d, k) {
			seen.keys = append(seen.keys, lockmgr.Key{Name: k.Name, Rule: k.Rule})
		} else {
			kept = append(kept, k)
		}
	}
	d.Keys = kept
	return d
}

// keyObserved reports whether the rule that asked for k is in observe
// mode.
func keyObserved(d rules.Decision, k rules.Key) bool {
	for _, r := range d.Rules {
		if r.Name == k.Rule {
			return r.Observes()
		}
	}
	return false
}

// observeRefusal lifts d's refusal when only rules in observe mode make it,
// recording it as theirs.
func (g *guard) observeRefusal(d rules.Decision, why string) rules.Decision {
	var by []*rules.Rule
	reason := why
	if len(d.Hidden) > 0 {
		for _, h := range d.Hidden {
			by = append(by, h.Rule)
		}
		if reason == "" {
			reason = refuseStoredCode
		}
	} else {
		for _, u := range d.Unkeyed {
			if u.Rejects() {
				by = append(by, u.Rule)
			}
		}
	}
	if reason == "" {
		reason = refuseUnkeyed
	}
	if len(by) == 0 {
		return d
	}
	if slices.ContainsFunc(by, func(r *rules.Rule) bool { return !r.Observes() }) {
		// An enforcing rule refuses it: its message, not an observing
		// rule's, is the answer.
		d.Hidden = slices.DeleteFunc(slices.Clone(d.Hidden), func(h rules.Hidden) bool { return h.Rule.Observes() })
		d.Unkeyed = slices.DeleteFunc(slices.Clone(d.Unkeyed), func(u rules.Unkeyed) bool { return u.Rule.Observes() })
		return d
	}
	g.refuseObserved(by[0].Name, reason, d.RejectReason())
	d.Reject = false
	return d
}

// refuseObserved records a refusal a rule in observe mode would have made.
func (g *guard) refuseObserved(rule, reason, msg string) {
	seen := g.observedPart()
	seen.refused = append(seen.refused, observedRefusal{rule: rule, reason: reason, msg: msg})
}

// allObserve reports whether every rule of rs is in observe mode.
func allObserve(rs []*rules.Rule) bool {
	return len(rs) > 0 && !slices.ContainsFunc(rs, func(r *rules.Rule) bool { return !r.Observes() })
}

// observe counts and audits what the rules in observe mode would have done
// to the command about to run (g.seen), and checks, without waiting,
// whether another session holds one of the keys they would have locked.
func (s *session) observe(g guard, an *parser.Analysis) {
	seen := g.seen
	shape := ""
	if an != nil {
		shape = parser.Redact(truncate(an.SQL, 4096))
	}
	for _, r := range seen.refused {
		s.noteObserved(r.rule, wouldRefuse, r.reason, shape, nil, zap.String("error", "lockproxy: "+r.msg))
	}
	for _, rule := range seen.rewrites {
		s.noteObserved(rule, wouldRewrite, "", shape, nil)
	}
	if len(seen.keys) == 0 {
		return
	}
	holders, probed := s.probeObserved(seen.keys)
	for _, rule := range ruleNames(seen.keys) {
		keys := ruleKeys(seen.keys, rule)
		s.noteObserved(rule, wouldLock, "", shape, keys)
		if h := holders[rule]; len(h) > 0 {
			s.noteObserved(rule, wouldWait, "", shape, keys, zap.Strings("holders", h))
		} else if probed != nil {
			s.srv.audit.Debug("observe: no answer to the check for another holder", zap.String("rule", rule), zap.Error(probed))
		}
	}
}

// noteObserved counts one observed outcome and writes its audit line.
func (s *session) noteObserved(rule, outcome, reason, shape string, keys []string, fields ...zap.Field) {
	s.srv.metrics.observed.WithLabelValues(rule, outcome, reason).Inc()
	fields = append(fields, zap.String("rule", rule), zap.String("outcome", outcome), zap.String("statement", shape),
		zap.Strings("keys", keys), zap.Uint32("session", s.id), zap.String("user", s.user))
	if reason != "" {
		fields = append(fields, zap.String("reason", reason))
	}
	s.srv.audit.Info("observe: "+outcome, fields...)
}

func ruleNames(keys []lockmgr.Key) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k.Rule) {
			out = append(out, k.Rule)
		}
	}
	return out
}

func ruleKeys(keys []lockmgr.Key, rule string) []string {
	var out []string
	for _, k := range keys {
		if k.Rule == rule {
			out = append(out, k.Name)
		}
	}
	return out
}

// observeMarker prefixes the lock names the sessions of observing rules
// take in the lock service: a name no row key has, so the markers show one
// observing session to another (on any instance sharing the service) and
// never make an enforcing session wait.
const observeMarker = "observe:"

// probeObserved takes the markers of keys for the session's transaction
// without waiting behind anyone (observeProbe bounds the call) and
// returns, per rule, the other holders it found. The markers are given
// back when the transaction ends (releaseWatch), as the locks would be.
func (s *session) probeObserved(keys []lockmgr.Key) (holders map[string][]string, err error) {
	if s.srv.locker == nil {
		return nil, nil
	}
	if s.watch != nil && s.watch.Err() != nil {
		s.releaseWatch() // a marker's lease ran out: start afresh
	}
	if s.watch == nil {
		s.watch = lockmgr.NewSet(s.srv.locker, s.watchOwner())
	} else if s.watch.Len() == 0 {
		s.watch.Begin(s.watchOwner())
	}
	for _, rule := range ruleNames(keys) {
		var markers []lockmgr.Key
		for _, name := range ruleKeys(keys, rule) {
			markers = append(markers, lockmgr.Key{Name: observeMarker + name, Rule: rule})
		}
		var trace lockmgr.WaitTrace
		ctx, cancel := context.WithTimeout(lockmgr.WithWaitTrace(s.hardCtx, &trace), observeProbe)
		aerr := s.watch.Acquire(ctx, markers)
		cancel()
		switch {
		case aerr == nil:
		case len(trace.Holders()) > 0:
			holders = addHolders(holders, rule, trace.Holders())
		case errors.Is(aerr, lockmgr.ErrWaitTimeout), errors.Is(aerr, lockmgr.ErrDeadlock):
			// Queued behind someone the backend did not name.
			holders = addHolders(holders, rule, []string{"unknown"})
		default:
			err = aerr
		}
	}
	return holders, err
}

func addHolders(m map[string][]string, rule string, holders []string) map[string][]string {
	if m == nil {
		m = map[string][]string{}
	}
	m[rule] = holders
	return m
}

// watchOwner owns the session's markers: the instance's name with
// "/observe" added, so they never pass for the session's own locks.
func (s *session) watchOwner() lockmgr.Owner {
	return lockmgr.Owner{Instance: s.srv.instance + "/observe", Session: uint64(s.id), Txn: s.txnSeq, Start: time.Now()}
}

// releaseWatch gives back the session's markers once its transaction has
// ended.
func (s *session) releaseWatch() {
	if s.watch == nil || s.watch.Len() == 0 {
		return
	}
	ctx, cancel := releaseCtxFor(s.watch)
	defer cancel()
	if err := s.watch.Release(ctx); err != nil {
		s.log.Warn("observe markers not given back; they end with their lease", zap.Error(err))
	}
}

// observeCurrentRead is currentRead for a read only rules in observe mode
// lock: the read runs as sent, and what enforcing them would have done to
// it is recorded (a current read is a rewrite of its text; one lockproxy
// could not send so would have been refused).
func (pl *planner) observeCurrentRead(f *parser.Facts, d rules.Decision, depth int) {
	g := &pl.p.guard
	if depth == 0 && f.CurrentReadOK() {
		g.rewriteObserved(d.Rule.Name)
		return
	}
	g.refuseObserved(d.Rule.Name, refuseNotCurrent, fmt.Sprintf("rule %s: a read of %s in a transaction, where its row locks need a current read, that lockproxy cannot give LOCK IN SHARE MODE", d.Rule.Name, d.Rule.Table))
}
