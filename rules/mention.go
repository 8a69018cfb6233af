package rules

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// Locking returns the first rule (in rules.yaml order) that takes row
// locks for some class of statement, or nil when none does: the rule to
// name when lockproxy cannot see which table a statement touches.
func (rs *RuleSet) Locking() *Rule {
	if rs == nil {
		return nil
	}
	return rs.preferEnforced(func(r *Rule) bool { return len(r.Lock) > 0 })
}

// preferEnforced returns the first rule (in rules.yaml order) that want
// accepts, an enforcing one before any in observe mode: a refusal an
// enforcing rule makes must not pass as an observed one.
func (rs *RuleSet) preferEnforced(want func(*Rule) bool) *Rule {
	var observed *Rule
	for i := range rs.cfg.Rules {
		r := &rs.cfg.Rules[i]
		switch {
		case !want(r):
		case !r.Observes():
			return r
		case observed == nil:
			observed = r
		}
	}
	return observed
}

// Mentions returns the first locking rule whose table name appears in text
// as a word (case-insensitive, anywhere: in comments and string literals
// too), or nil. It is the conservative test for text lockproxy cannot
// analyse: a statement that never names a guarded table cannot touch one
// directly.
func (rs *RuleSet) Mentions(text string) *Rule {
	locks := func(r *Rule) bool { return len(r.Lock) > 0 }
	return rs.mentions(text, locks, func(r *Rule) bool { return locks(r) || r.Rewrite != nil })
}

// MentionsRejectingUnpaired is Mentions for the rules with
// rewrite.on_unpaired: reject: text lockproxy cannot analyse that names
// such a rule's table (or a view, routine or trigger reaching it) may
// write its guarded column in a form no rewrite makes conditional.
func (rs *RuleSet) MentionsRejectingUnpaired(text string) *Rule {
	if rs == nil || !rs.rejectsUnpaired {
		return nil
	}
	return rs.mentions(text, rejectsUnpaired, rejectsUnpaired)
}

// RejectingUnpaired returns the first rule with rewrite.on_unpaired:
// reject, or nil: the rule to name when lockproxy cannot see what a
// statement writes.
func (rs *RuleSet) RejectingUnpaired() *Rule {
	if rs == nil || !rs.rejectsUnpaired {
		return nil
	}
	return rs.preferEnforced(rejectsUnpaired)
}

// mentions returns the first rule accepted by table whose table name
// appears in text as a word, else the first accepted by object that a view,
// routine or trigger named in text reaches.
func (rs *RuleSet) mentions(text string, table, object func(*Rule) bool) *Rule {
	if rs == nil {
		return nil
	}
	if rs.observes {
		// An enforcing rule named in text refuses it, whatever an
		// observing one would have done.
		enforced := func(want func(*Rule) bool) func(*Rule) bool {
			return func(r *Rule) bool { return !r.Observes() && want(r) }
		}
		if r := rs.mentionsIn(text, enforced(table), enforced(object)); r != nil {
			return r
		}
	}
	return rs.mentionsIn(text, table, object)
}

func (rs *RuleSet) mentionsIn(text string, table, object func(*Rule) bool) *Rule {
	lower := strings.ToLower(text)
	for i := range rs.cfg.Rules {
		r := &rs.cfg.Rules[i]
		if !table(r) {
			continue
		}
		_, name, ok := SplitTable(r.Table)
		if ok && containsWord(lower, strings.ToLower(name)) {
			return r
		}
	}
	return rs.mentionsObject(lower, object)
}

// mentionsObject is mentions for the views, routines and triggers that
// reach a guarded table: the name of such a view or routine, or of a table
// with such a trigger, in lower.
func (rs *RuleSet) mentionsObject(lower string, want func(*Rule) bool) *Rule {
	op := rs.objects
	if op == nil {
		return nil
	}
	first := func(rs []reach) *Rule {
		for _, r := range rs {
			if want(r.cr.rule) {
				return r.cr.rule
			}
		}
		return nil
	}
	named := func(qualified string) bool {
		_, name, _ := strings.Cut(qualified, ".")
		return containsWord(lower, name)
	}
	for name, v := range op.views {
		if r := first(v.guards); r != nil && named(name) {
			return r
		}
	}
	for _, m := range []map[string]*hiddenNode{op.procs, op.funcs} {
		for name, n := range m {
			if r := first(n.reaches); r != nil && named(name) {
				return r
			}
		}
	}
	for table, ns := range op.triggers {
		for _, n := range ns {
			if r := first(n.reaches); r != nil && named(table) {
				return r
			}
		}
	}
	return nil
}

// containsWord reports whether word occurs in s not preceded or followed
// by an identifier byte.
func containsWord(s, word string) bool {
	for from := 0; from <= len(s)-len(word); {
		i := strings.Index(s[from:], word)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(word)
		if (i == 0 || !identByte(s[i-1])) && (end == len(s) || !identByte(s[end])) {
			return true
		}
		from = i + 1
	}
	return false
}

func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// UnkeyedDecision is the decision for a statement that may touch r's table
// with rows lockproxy cannot know (reason says why): r is unkeyed, and its
// on_unkeyed decides whether the statement runs.
func UnkeyedDecision(r *Rule, reason string) Decision {
	d := Decision{Rule: r, Rules: []*Rule{r}, Class: ClassWrite, RoutePrimary: r.Route == RoutePrimary}
	d.Unkeyed = []Unkeyed{{Rule: r, Table: r.Table, Reason: reason}}
	d.Reject = r.OnUnkeyed == OnUnkeyedReject
	return d
}

// RunsStoredCode reports whether f may run code stored on the server that
// lockproxy does not see: a procedure it calls, a stored function it (or a
// view it reads) calls, or a trigger on a table it writes. Such code may
// set user variables and prepare statements. Without the schema's objects
// (the primary could not be asked) any function call counts.
func (rs *RuleSet) RunsStoredCode(f *parser.Facts, currentDB string) bool {
	if f.Procedure != "" {
		return true
	}
	if rs == nil || rs.objects == nil {
		return len(f.Calls) > 0
	}
	for _, c := range f.Calls {
		if rs.objects.funcs[c] != nil {
			return true
		}
	}
	for _, ref := range f.Tables {
		schema := refSchema(ref, currentDB)
		if v := rs.view(schema, ref.Name); v != nil {
			for _, c := range v.calls {
				if rs.objects.funcs[c] != nil {
					return true
				}
			}
		}
		if ref.Write && len(rs.objects.triggers[schema+"."+ref.Name]) > 0 {
			return true
		}
	}
	return false
}

// MayCreateTemporary reports whether f may run stored code that makes a
// temporary table lockproxy does not see: a procedure or stored function
// it calls (or a view it reads calls), or a trigger on a table it writes,
// whose body, or that of code it calls, names TEMPORARY, runs dynamic SQL
// or cannot be read. Without the schema's objects any call or write
// counts.
func (rs *RuleSet) MayCreateTemporary(f *parser.Facts, currentDB string) bool {
	if rs == nil || rs.objects == nil {
		if f.Procedure != "" || len(f.Calls) > 0 {
			return true
		}
		for _, ref := range f.Tables {
			if ref.Write {
				return true
			}
		}
		return false
	}
	op := rs.objects
	var start []*hiddenNode
	if f.Procedure != "" {
		p := op.procs[f.Procedure]
		if p == nil {
			return true // not in the schema read: made since
		}
		start = append(start, p)
	}
	for _, ref := range f.Tables {
		if ref.Write {
			start = append(start, op.triggers[refSchema(ref, currentDB)+"."+ref.Name]...)
		}
	}
	return reaches(rs.calledFunctions(f, currentDB, start), mayTemp)
}

// MayReadPrevious reports whether a stored function the statement f
// calls (by name or through a view) may read what the statement before f
// left on its connection: ROW_COUNT() or FOUND_ROWS() in its body or in a
// routine it calls, dynamic SQL, or a body lockproxy's user cannot see.
// Without the schema's objects every call may (the parser does not know
// which names are built in). A CALL's procedure is not asked about: a
// procedure's ROW_COUNT() reads its own statements' far more often than
// its caller's.
func (rs *RuleSet) MayReadPrevious(f *parser.Facts, currentDB string) bool {
	if len(f.Calls) == 0 && len(f.Tables) == 0 {
		return false
	}
	if rs == nil || rs.objects == nil {
		return len(f.Calls) > 0
	}
	return reaches(rs.calledFunctions(f, currentDB, nil), readsLeft)
}

// calledFunctions appends to start the stored functions f calls by name
// or through a view it reads (rs has the schema's objects).
func (rs *RuleSet) calledFunctions(f *parser.Facts, currentDB string, start []*hiddenNode) []*hiddenNode {
	add := func(calls []string) {
		for _, c := range calls {
			if fn := rs.objects.funcs[c]; fn != nil {
				start = append(start, fn)
			}
		}
	}
	add(f.Calls)
	for _, ref := range f.Tables {
		if v := rs.view(refSchema(ref, currentDB), ref.Name); v != nil {
			add(v.calls)
		}
	}
	return start
}

// reaches reports whether a node of start, or one they call, has what
// has says (mayTemp, readsLeft).
func reaches(start []*hiddenNode, has func(*hiddenNode) bool) bool {
	seen := map[*hiddenNode]bool{}
	for len(start) > 0 {
		n := start[len(start)-1]
		start = start[:len(start)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		if has(n) {
			return true
		}
		start = append(start, n.calls...)
	}
	return false
}

func mayTemp(n *hiddenNode) bool   { return n.mayTemp }
func readsLeft(n *hiddenNode) bool { return n.readsLeft }

// MayCreateTemporaryText is MayCreateTemporary for a text the parser could
// not read, by the names in it (parser.LexNames): it names TEMPORARY or
// PREPARE/EXECUTE, or a routine, a view calling one or a table with
// triggers whose code may make a temporary table. Without the schema's
// objects every text counts.
func (rs *RuleSet) MayCreateTemporaryText(text, currentDB string) bool {
	if rs == nil || rs.objects == nil {
		return true
	}
	op := rs.objects
	var start []*hiddenNode
	for _, w := range parser.LexNames(text) {
		switch w {
		case "temporary", "prepare", "execute":
			return true
		}
		ref := qualify(w, strings.ToLower(currentDB))
		name := ref.Schema + "." + ref.Name
		if n := op.procs[name]; n != nil {
			start = append(start, n)
		}
		if n := op.funcs[name]; n != nil {
			start = append(start, n)
		}
		if v := op.views[name]; v != nil {
			for _, c := range v.calls {
				if n := op.funcs[c]; n != nil {
					start = append(start, n)
				}
			}
		}
		start = append(start, op.triggers[name]...)
	}
	return reaches(start, mayTemp)
}
