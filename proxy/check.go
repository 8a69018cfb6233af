package proxy

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// Workload is what lockproxy would do with a recorded workload, for
// `lockproxy check`: the statements of each session (a thread of a MariaDB
// general query log) are planned in order, as the session would be, with
// its database, transaction and dynamic SQL state, and the decisions are
// gathered per statement shape. It asks no server: key columns normalise by
// their literal form, and views, routines, triggers and collations are not
// known. Not safe for concurrent use.
type Workload struct {
	rs       *rules.RuleSet
	replicas bool
	sessions map[uint64]*checkSession
	shapes   map[string]*ShapeDecision
	observed map[ObservedKey]int
	// Statements counts the statements planned; Unparsable those the
	// parser could not read at all (counted, not planned).
	Statements, Unparsable int
}

type checkSession struct {
	db               string
	inTxn, noAutoTxn bool // in an explicit transaction; autocommit off
	dyn              dynState
	// charset and connection are the client and connection character
	// sets the session's SETs named: "" for none seen (the connection's
	// own, which a log does not show), "?" for one the server computed.
	charset, connection string
}

// ShapeDecision is one statement shape (literals as ?) and what lockproxy
// would do with it, with how many statements of the workload it stands
// for. A shape whose statements get different decisions (another rule,
// a refusal for some values, inside and outside a transaction) has one
// ShapeDecision per decision.
type ShapeDecision struct {
	Shape    string
	Count    int
	Decision []string // the decision, one line per fact
	Example  *Explanation
}

// NewWorkload returns an empty Workload planned under rs; replicas says
// whether replicas are configured (reads would be routed to them).
func NewWorkload(rs *rules.RuleSet, replicas bool) *Workload {
	return &Workload{rs: rs, replicas: replicas, sessions: map[uint64]*checkSession{}, shapes: map[string]*ShapeDecision{}, observed: map[ObservedKey]int{}}
}

func (w *Workload) session(id uint64) *checkSession {
	s := w.sessions[id]
	if s == nil {
		s = &checkSession{}
		w.sessions[id] = s
	}
	return s
}

// Connect starts session id in database db ("" for none).
func (w *Workload) Connect(id uint64, db string) {
	w.sessions[id] = &checkSession{db: db}
}

// UseDB changes session id's current database (COM_INIT_DB).
func (w *Workload) UseDB(id uint64, db string) { w.session(id).db = db }

// Quit ends session id.
func (w *Workload) Quit(id uint64) { delete(w.sessions, id) }

// Statement plans one statement text session id ran.
func (w *Workload) Statement(id uint64, sql string) {
	s := w.session(id)
	env := offlineEnv(w.rs, s.db, s.inTxn || s.noAutoTxn, &s.dyn)
	env.autocommit = !s.noAutoTxn
	s.charsets(&env)
	e, p, err := explainIn(env, sql, w.replicas, nil)
	if err != nil {
		w.Unparsable++
		return
	}
	w.Statements++
	w.tally(p.guard)
	s.dyn.apply(p.dyn, true)
	s.follow(e.Analysis)
	d := decision(e)
	key := e.Analysis.SQL
	shape := parser.Redact(truncate(key, 4096))
	key = shape + "\x00" + strings.Join(d, "\x00")
	sd := w.shapes[key]
	if sd == nil {
		sd = &ShapeDecision{Shape: shape, Decision: d, Example: e}
		w.shapes[key] = sd
	}
	sd.Count++
}

// follow tracks what a statement does to the session's transaction and
// current database.
func (s *checkSession) follow(an *parser.Analysis) {
	if an.Unparsed && an.LexKind == parser.KindSet {
		low := strings.ToLower(an.SQL)
		if strings.Contains(low, "names") || strings.Contains(low, "character") {
			s.charset = "?" // a SET lockproxy cannot read may change it
		}
	}
	for _, f := range an.Stmts {
		if cs := f.Effects.ClientCharset; cs != "" {
			s.charset = cs
			if slices.Contains(f.Effects.SessionVars, "names") {
				s.connection = cs
			}
		}
		switch {
		case f.Kind == parser.KindBegin:
			s.inTxn = true
		case f.Kind == parser.KindCommit, f.Kind == parser.KindRollback, f.ImplicitCommit:
			s.inTxn = false
		}
		switch f.Effects.Autocommit {
		case parser.AutocommitOn:
			s.noAutoTxn, s.inTxn = false, false
		case parser.AutocommitOff:
			s.noAutoTxn = true
		}
		if f.Kind == parser.KindUse && f.UseDB != "" {
			s.db = f.UseDB
		}
	}
}

// charsets plans in the character set the session's SETs named, as a
// live session plans in the one the server reports: in gbk and the other
// character sets whose multi-byte characters may hold a backslash or a
// quote byte, text with such bytes is uncertain. One the server computed
// is taken for such a set.
func (s *checkSession) charsets(env *planEnv) {
	switch s.charset {
	case "":
	case "?":
		env.unsafeCharset = true
	default:
		env.clientCharset = s.charset
		env.unsafeCharset = !parser.RewriteSafeCharset(s.charset)
		env.text = rules.TextCharsets{Client: s.charset, Connection: s.connection}
	}
}

// decision is what e says lockproxy would do, without the statement's own
// values: the rule, the locks per rule, the refusal, the rewrite, whether
// a combining rule would combine it, what observing rules would do, the
// route.
func decision(e *Explanation) []string {
	out := []string{"rule:       " + orNone(e.Rule)}
	switch {
	case e.NeedParams && len(e.Keys) == 0:
		out = append(out, "locks:      from the parameters bound at execute time")
	case len(e.Keys) == 0:
		out = append(out, "locks:      none")
	default:
		out = append(out, "locks:      "+countByRule(e.Keys))
	}
	if e.Reject != "" {
		out = append(out, "rejected:   "+e.Reject)
	}
	if e.RewriteWhy != "" {
		out = append(out, "rewritten:  no ("+e.RewriteWhy+")")
	}
	if e.Combined != "" {
		out = append(out, "combined:   "+e.Combined)
	}
	var locks []string
	for _, o := range e.Observed {
		if strings.HasPrefix(o, wouldLock+" ") {
			locks = append(locks, strings.TrimPrefix(o, wouldLock+" "))
			continue
		}
		out = append(out, "observed:   "+o)
	}
	if len(locks) > 0 {
		out = append(out, "observed:   "+wouldLock+" "+countByRule(locks))
	}
	return append(out, "route:      "+e.Route+" ("+e.RouteWhy+")")
}

// countByRule turns "rule: key" entries into "rule (n keys)" per rule.
func countByRule(keys []string) string {
	n := map[string]int{}
	var order []string
	for _, k := range keys {
		rule, _, _ := strings.Cut(k, ": ")
		if n[rule] == 0 {
			order = append(order, rule)
		}
		n[rule]++
	}
	var out []string
	for _, r := range order {
		unit := "keys"
		if n[r] == 1 {
			unit = "key"
		}
		out = append(out, fmt.Sprintf("%s (%d %s)", r, n[r], unit))
	}
	return strings.Join(out, ", ")
}

// Shapes returns the shapes seen, the most frequent first (ties by shape).
func (w *Workload) Shapes() []*ShapeDecision {
	out := make([]*ShapeDecision, 0, len(w.shapes))
	for _, sd := range w.shapes {
		out = append(out, sd)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		if out[i].Shape != out[j].Shape {
			return out[i].Shape < out[j].Shape
		}
		return strings.Join(out[i].Decision, "\n") < strings.Join(out[j].Decision, "\n")
	})
	return out
}

// Print writes the shapes and their decisions, then the totals.
func (w *Workload) Print(out io.Writer) {
	refused, locked, observed := 0, 0, 0
	for _, sd := range w.Shapes() {
		fmt.Fprintf(out, "%d x %s\n", sd.Count, sd.Shape)
		for _, line := range sd.Decision {
			fmt.Fprintf(out, "    %s\n", line)
		}
		fmt.Fprintln(out)
		if sd.Example.Reject != "" {
			refused += sd.Count
		} else if len(sd.Example.Keys) > 0 {
			locked += sd.Count
		}
		if len(sd.Example.Observed) > 0 {
			observed += sd.Count
		}
	}
	fmt.Fprintf(out, "statements: %d in %d shapes; locked %d, refused %d, observed %d; unparsable %d\n",
		w.Statements, len(w.shapes), locked, refused, observed, w.Unparsable)
	if _, ok := w.rs.Schema().Objects(); ok {
		fmt.Fprintln(out, "schema: read from the server (columns, keys, collations, views, routines, triggers); would_wait needs the lock service at the time")
		return
	}
	fmt.Fprintln(out, "not known without a server: the schema's column types and collations, views, routines and triggers (keys normalise by their literal form; a statement that may run stored code is refused as when the primary's routines cannot be read); would_wait needs the lock service at the time")
}

// ObservedKey is one series of lockproxy_observed_total.
type ObservedKey struct{ Rule, Outcome, Reason string }

// Observed counts what the rules in observe mode would have done to the
// workload, as a live lockproxy counts it in lockproxy_observed_total,
// except would_wait, which only the lock service at the time can tell.
func (w *Workload) Observed() map[ObservedKey]int { return w.observed }

// tally counts g's observations as observe does.
func (w *Workload) tally(g guard) {
	if g.seen == nil || g.reject != nil {
		return // nothing observed, or refused before anything runs
	}
	for _, r := range g.seen.refused {
		w.observed[ObservedKey{r.rule, wouldRefuse, r.reason}]++
	}
	for _, rule := range g.seen.rewrites {
		w.observed[ObservedKey{rule, wouldRewrite, ""}]++
	}
	for _, rule := range ruleNames(g.seen.keys) {
		w.observed[ObservedKey{rule, wouldLock, ""}]++
	}
}
