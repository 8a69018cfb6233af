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

// observeProbe bounds the check for another holder of an observed key
// (one round trip to the lock service, which never waits for a lock): a
// statement of an observing rule is delayed by at most this, never held
// behind the other holder.
const observeProbe = 500 * time.Millisecond

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
		s.srv.noteObserved(s.id, s.user, r.rule, wouldRefuse, r.reason, shape, nil, zap.String("error", "lockproxy: "+r.msg))
	}
	for _, rule := range seen.rewrites {
		s.srv.noteObserved(s.id, s.user, rule, wouldRewrite, "", shape, nil)
	}
	if len(seen.keys) == 0 {
		return
	}
	holders, probed := s.obs.probe(s.hardCtx, seen.keys)
	for _, rule := range ruleNames(seen.keys) {
		keys := ruleKeys(seen.keys, rule)
		s.srv.noteObserved(s.id, s.user, rule, wouldLock, "", shape, keys)
		if h := holders[rule]; len(h) > 0 {
			s.srv.noteObserved(s.id, s.user, rule, wouldWait, "", shape, keys, zap.Strings("holders", h))
		} else if probed != nil {
			s.srv.audit.Debug("observe: no answer to the check for another holder", zap.String("rule", rule), zap.Error(probed))
		}
	}
}

// noteObserved counts one observed outcome of session id's statement
// and writes its audit line.
func (s *Server) noteObserved(id uint32, user, rule, outcome, reason, shape string, keys []string, fields ...zap.Field) {
	s.metrics.observed.WithLabelValues(rule, outcome, reason).Inc()
	if slices.Contains(shapeOutcomes, outcome) {
		s.metrics.shapes.add(rule, outcome, reason, shape)
	}
	fields = append(fields, zap.String("rule", rule), zap.String("outcome", outcome), zap.String("statement", shape),
		zap.Strings("keys", keys), zap.Uint32("session", id), zap.String("user", user))
	if reason != "" {
		fields = append(fields, zap.String("reason", reason))
	}
	s.audit.Info("observe: "+outcome, fields...)
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

// watching is what a session has noted in the lock service for its
// current transaction on behalf of the rules in observe mode
// (lockmgr.Observer): the keys they would have locked so far, which
// enforcing them would now hold.
type watching struct {
	owner lockmgr.Owner
	keys  map[string]lockmgr.Key
}

// probe asks the lock service, in one round trip and without
// waiting behind anyone, who is in the way of the keys (see
// lockmgr.Observer): the owner holding a key's lock, on any instance, or
// observing sessions that noted it first. It returns, per rule, the
// others it found for the keys the transaction had not noted yet; a key
// noted before would already be held, so it waits for no one (its note is
// only kept fresh). The notes are given back when the transaction ends
// (release), as the locks would be, or end with their ttl. ctx ends when
// lockproxy stops for good.
func (o *observeState) probe(ctx context.Context, keys []lockmgr.Key) (holders map[string][]string, err error) {
	if o.svc.observer == nil {
		return nil, errNoObserver
	}
	if o.watchEnd != nil {
		// The notes of the session's last transaction must be gone
		// first, or they would stand in this one's way.
		<-o.watchEnd
		o.watchEnd = nil
	}
	if o.watch == nil {
		o.watchSeq++
		owner := lockmgr.Owner{Instance: o.svc.observeInstance, Session: uint64(o.session), Txn: o.watchSeq, Start: time.Now()}
		o.watch = &watching{owner: owner, keys: map[string]lockmgr.Key{}}
	}
	ctx, cancel := context.WithTimeout(ctx, observeProbe)
	inWay, err := o.svc.observer.Observe(ctx, o.watch.owner, keys)
	cancel()
	for _, k := range keys {
		_, noted := o.watch.keys[k.Name]
		o.watch.keys[k.Name] = k // also on error: the note may have landed
		if noted || err != nil {
			continue
		}
		for _, h := range inWay[k.Name] {
			holders = addHolder(holders, k.Rule, h)
		}
	}
	return holders, err
}

// errNoObserver: the lock backend cannot say who is in an observed key's
// way (the Locker does not implement lockmgr.Observer).
var errNoObserver = errors.New("lockproxy: the lock backend does not answer observe mode's check")

func addHolder(m map[string][]string, rule, holder string) map[string][]string {
	if m == nil {
		m = map[string][]string{}
	}
	if !slices.Contains(m[rule], holder) {
		m[rule] = append(m[rule], holder)
	}
	return m
}

// release gives back the session's notes once its transaction has
// ended, in the background: the client's answer does not wait for it,
// the session's next check does (watchEnd).
func (o *observeState) release() {
	w := o.watch
	if w == nil {
		return
	}
	o.watch = nil
	ob := o.svc.observer
	if ob == nil || len(w.keys) == 0 {
		return
	}
	keys := make([]lockmgr.Key, 0, len(w.keys))
	for _, k := range w.keys {
		keys = append(keys, k)
	}
	done, log := make(chan struct{}), o.log
	o.watchEnd = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := ob.EndObserve(ctx, w.owner, keys); err != nil {
			log.Warn("observe notes not given back; the lock service drops them once it answers again (etcd, ZooKeeper) or when their ttl ends", zap.Error(err))
		}
	}()
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

// observeState is what a session noted in the lock service for the keys
// that rules in observe mode would have locked.
type observeState struct {
	// svc, session and log are fixed when the session starts: the lock
	// service (its observer is the check, nil when it has none:
	// errNoObserver), the session's id and its log.
	svc     *lockService
	session uint32
	log     *zap.Logger
	// watch is what the session noted in the lock service for the keys
	// rules in observe mode would have locked in the current transaction
	// (observe.go); nil until one does. watchSeq numbers such
	// transactions.
	watch    *watching
	watchSeq uint64
	watchEnd chan struct{} // closed when the last notes given back are gone
}
