package proxy

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// Explanation is what lockproxy would do with one query text, for
// `lockproxy explain`.
type Explanation struct {
	SQL        string
	DB         string
	Analysis   *parser.Analysis
	InTxn      bool
	Rule       string   // first matching rule, "" when none
	Keys       []string // lock keys (rule: key)
	NeedParams bool     // keys come from placeholders bound at execute time
	Reject     string   // the error a rejected statement gets
	Route      string   // primary | replica
	RouteWhy   string
	Rewritten  string // the guarded UPDATE sent instead, "" when none
	RewriteWhy string // why no rewrite applies, when a rewrite rule guards the table
	// Combined says, for an UPDATE of a combining rule's table, whether
	// it runs in a combined batch when others of its row are in flight
	// ("yes: ..." or "no (reason)").
	Combined string
	// Observed is what rules in observe mode would have done (outcome,
	// rule, key or reason), none of which lockproxy does.
	Observed []string
}

// Explain analyses sql as a session in database db would (inTxn: inside a
// transaction) under rs and says what lockproxy would do, without talking
// to any server. replicas says whether replicas are configured; old is the
// value the session is taken to have read for the row an UPDATE writes
// (nil: nothing remembered).
func Explain(rs *rules.RuleSet, sql, db string, inTxn, replicas bool, old []byte) (*Explanation, error) {
	e, _, err := explainIn(offlineEnv(rs, db, inTxn, nil), sql, replicas, old)
	return e, err
}

// offlineEnv is the planning environment of a session lockproxy only
// imagines (explain, check): no server tells it the session's state.
func offlineEnv(rs *rules.RuleSet, db string, inTxn bool, dyn *dynState) planEnv {
	return planEnv{rs: rs, db: db, inTxn: inTxn, autocommit: true, dyn: dyn, analyze: func(text string) *parser.Analysis {
		inner, err := parser.Analyze(text, db)
		if err != nil {
			return &parser.Analysis{SQL: text, DB: db, Unparsed: true, ParseError: err.Error()}
		}
		return inner
	}}
}

// explainIn is Explain in env, also returning the plan.
func explainIn(env planEnv, sql string, replicas bool, old []byte) (*Explanation, plan, error) {
	db, inTxn := env.db, env.inTxn
	an, err := parser.Analyze(sql, db)
	if err != nil {
		return nil, plan{}, err
	}
	e := &Explanation{SQL: sql, DB: db, Analysis: an, InTxn: inTxn}
	p := makePlan(env, an, nil)
	g := p.guard
	e.NeedParams = p.needParams
	e.Rule = g.rule
	for _, k := range g.keys {
		e.Keys = append(e.Keys, k.Rule+": "+k.Name)
	}
	if g.reject != nil {
		se := toSQLError(g.reject)
		e.Reject = fmt.Sprintf("ERROR %d (%s): %s", se.Code, se.State, se.Msg)
	}
	e.explainObserved(g.seen)
	e.explainRewrite(p.rewrite, old)
	e.Combined = explainCombine(p, inTxn)
	e.Route, e.RouteWhy = "primary", p.primaryWhy
	switch {
	case e.RouteWhy != "":
	case !replicas:
		e.RouteWhy = "no replicas configured"
	case inTxn:
		e.RouteWhy = "inside a transaction"
	default:
		e.Route, e.RouteWhy = "replica", "autocommit plain read (a healthy replica within max_replica_lag, else the primary)"
	}
	return e, p, nil
}

// explainObserved lists what rules in observe mode would have done.
func (e *Explanation) explainObserved(seen *observation) {
	if seen == nil {
		return
	}
	for _, k := range seen.keys {
		e.Observed = append(e.Observed, wouldLock+" "+k.Rule+": "+k.Name)
	}
	for _, r := range seen.refused {
		e.Observed = append(e.Observed, fmt.Sprintf("%s %s (%s): lockproxy: %s", wouldRefuse, r.rule, r.reason, r.msg))
	}
	for _, rule := range seen.rewrites {
		e.Observed = append(e.Observed, wouldRewrite+" "+rule)
	}
}

func (e *Explanation) explainRewrite(t target, old []byte) {
	an := e.Analysis
	if t.rule == nil || an.Stmts[0].Kind != parser.KindUpdate || an.Params > 0 {
		return
	}
	r, keys := t.rule, t.keys
	if len(keys) != 1 {
		e.RewriteWhy = parser.ReasonSeveralRows
		return
	}
	spec := parser.RewriteSpec{Column: r.Rewrite.Column, Mode: r.Rewrite.Mode, Old: old, Key: r.Key}
	if r.Rewrite.Min != nil {
		spec.Min = strconv.FormatFloat(*r.Rewrite.Min, 'f', -1, 64)
	}
	sql, ok, reason, err := parser.RewriteUpdate(an.Stmts[0], spec, []any{})
	switch {
	case err != nil:
		e.RewriteWhy = err.Error()
	case !ok:
		e.RewriteWhy = reason
	default:
		e.Rewritten = sql
	}
}

// Print writes e for a person to read.
func (e *Explanation) Print(w io.Writer) {
	fmt.Fprintf(w, "sql:        %s\n", e.SQL)
	fmt.Fprintf(w, "database:   %s\n", orNone(e.DB))
	if e.Analysis.Unparsed {
		fmt.Fprintf(w, "parsed:     no (%s); tables by lexical scan: %s\n", e.Analysis.ParseError, tableList(e.Analysis.LexTables))
	}
	for i, f := range e.Analysis.Stmts {
		fmt.Fprintf(w, "statement %d: kind=%s lock=%s tables=%s params=%d", i+1, f.Kind, f.Lock.Mode, tableList(f.Tables), f.Params)
		if f.Effects.Any() {
			fmt.Fprint(w, " session-effects")
		}
		if f.ImplicitCommit {
			fmt.Fprint(w, " implicit-commit")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "rule:       %s\n", orNone(e.Rule))
	switch {
	case e.NeedParams && len(e.Keys) == 0:
		fmt.Fprintln(w, "locks:      from the parameters bound at execute time")
	case len(e.Keys) == 0:
		fmt.Fprintln(w, "locks:      none")
	default:
		fmt.Fprintf(w, "locks:      %s\n", strings.Join(e.Keys, ", "))
	}
	if e.Reject != "" {
		fmt.Fprintf(w, "rejected:   %s\n", e.Reject)
	}
	switch {
	case e.Rewritten != "":
		fmt.Fprintf(w, "rewritten:  %s\n", e.Rewritten)
	case e.RewriteWhy != "":
		fmt.Fprintf(w, "rewritten:  no (%s)\n", e.RewriteWhy)
	}
	if e.Combined != "" {
		fmt.Fprintf(w, "combined:   %s\n", e.Combined)
	}
	for _, o := range e.Observed {
		fmt.Fprintf(w, "observed:   %s\n", o)
	}
	fmt.Fprintf(w, "route:      %s (%s)\n", e.Route, e.RouteWhy)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func tableList(ts []parser.TableRef) string {
	if len(ts) == 0 {
		return "-"
	}
	var out []string
	for _, t := range ts {
		s := t.Qualified()
		if t.Write {
			s += "(write)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}
