package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// Hidden is a write to a guarded table that a statement makes where
// lockproxy cannot see it: in the body of a stored procedure or function
// it calls, or of a trigger that fires on a table it writes. The statement
// must not run (error 1105, RejectReason) unless the rule allows the
// routine or trigger (allow_routines, allow_triggers).
type Hidden struct {
	Rule *Rule
	// Table is the guarded table (schema.table, or the rule's table).
	Table string
	// Object is what hides the write: "procedure shop.p", "function
	// shop.f", "trigger shop.trg on shop.orders".
	Object string
	// Reason says why lockproxy thinks the object may write Table.
	Reason string
}

// objectPlan is what a RuleSet makes of its Schema's views, routines and
// triggers.
type objectPlan struct {
	views    map[string]*viewPlan
	procs    map[string]*hiddenNode // schema.name
	funcs    map[string]*hiddenNode
	triggers map[string][]*hiddenNode // schema.table → its triggers
}

// hiddenNode is a routine or trigger and the guarded tables it may touch.
type hiddenNode struct {
	kind    string // procedure | function | trigger
	name    string // schema.name
	schema  string
	table   string // a trigger's table, schema.table
	event   string // a trigger's event
	reaches []reach
	calls   []*hiddenNode // routines it calls and triggers its writes fire
	// mayTemp: its body may make a temporary table (it names TEMPORARY,
	// runs dynamic SQL, or cannot be seen).
	mayTemp bool
	// readsLeft: its body may read what the statement before its caller
	// left on the connection (it names ROW_COUNT or FOUND_ROWS, runs
	// dynamic SQL, or cannot be seen).
	readsLeft bool
}

// firedByWrites reports whether n runs because a write to its table does:
// a trigger, or a foreign key whose action writes its child table.
func (n *hiddenNode) firedByWrites() bool { return n.kind == "trigger" || n.kind == "foreign key" }

func (n *hiddenNode) object() string {
	if n.firedByWrites() {
		return "trigger " + n.name + " on " + n.table
	}
	return n.kind + " " + n.name
}

func (n *hiddenNode) add(r reach) bool {
	for _, x := range n.reaches {
		if x.cr == r.cr && x.table == r.table {
			return false
		}
	}
	n.reaches = append(n.reaches, r)
	return true
}

// compileObjects resolves the views, routines and triggers of objs against
// the rules.
func (rs *RuleSet) compileObjects(objs Objects) *objectPlan {
	op := &objectPlan{procs: map[string]*hiddenNode{}, funcs: map[string]*hiddenNode{},
		triggers: map[string][]*hiddenNode{}}
	rs.objects = op
	op.views = rs.compileViews(objs.Views)
	var nodes []*hiddenNode
	bodies := map[*hiddenNode]string{}
	for _, r := range objs.Routines {
		n := &hiddenNode{kind: "procedure", name: r.Schema + "." + r.Name, schema: r.Schema}
		m := op.procs
		if r.Function {
			n.kind, m = "function", op.funcs
		}
		m[n.name] = n
		nodes = append(nodes, n)
		if !r.BodyKnown {
			n.mayTemp, n.readsLeft = true, true
			rs.touchAll(n, "lockproxy's backend user cannot see its body")
			continue
		}
		bodies[n] = r.Body
	}
	for _, t := range objs.Triggers {
		kind := "trigger"
		if t.ForeignKey {
			kind = "foreign key"
		}
		n := &hiddenNode{kind: kind, name: t.Schema + "." + t.Name, schema: t.Schema,
			table: t.Schema + "." + t.Table, event: t.Event}
		op.triggers[n.table] = append(op.triggers[n.table], n)
		nodes = append(nodes, n)
		bodies[n] = t.Body
		if t.Before && !t.ForeignKey && (t.Event == "INSERT" || t.Event == "UPDATE") {
			rs.setsKeys(n, t)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	for _, n := range nodes {
		if body, ok := bodies[n]; ok {
			rs.scanBody(n, body)
		}
	}
	spread(nodes)
	return op
}

// setsKeys records that a BEFORE INSERT or UPDATE trigger on a guarded
// table whose body names NEW.<key column> may set it: the row written is
// then not the row the statement names, so the statement's keys are not
// the row's. Lexical, so a body that only reads NEW.<key> counts too
// (allow_triggers lets such a trigger be).
func (rs *RuleSet) setsKeys(n *hiddenNode, t Trigger) {
	names := map[string]bool{}
	for _, w := range parser.LexNames(t.Body) {
		names[w] = true
	}
	for _, cr := range rs.rulesFor(t.Schema, t.Table) {
		for _, k := range cr.rule.Key {
			if names["new."+strings.ToLower(k)] {
				n.add(reach{cr: cr, table: n.table, why: "it may set NEW." + strings.ToLower(k) + ", a key column, so the row written is not the one the statement names"})
				break
			}
		}
	}
}

// touchAll records that n may touch every guarded table.
func (rs *RuleSet) touchAll(n *hiddenNode, why string) {
	for _, cr := range rs.all {
		n.add(reach{cr: cr, table: ruleTable(cr), why: why})
	}
}

// scanBody finds, lexically, the guarded tables and views, the routines
// and the tables with triggers that n's body names, and dynamic SQL.
func (rs *RuleSet) scanBody(n *hiddenNode, body string) {
	op := rs.objects
	for _, w := range parser.LexNames(body) {
		switch w {
		case "prepare", "execute":
			n.mayTemp, n.readsLeft = true, true
			rs.touchAll(n, "it runs dynamic SQL (PREPARE/EXECUTE)")
			continue
		case "temporary":
			n.mayTemp = true
		case "row_count", "found_rows":
			n.readsLeft = true
		}
		ref := qualify(w, n.schema)
		name := ref.Schema + "." + ref.Name
		for _, cr := range rs.rulesFor(ref.Schema, ref.Name) {
			n.add(reach{cr: cr, table: name, why: "its body names " + name})
		}
		if v := op.views[name]; v != nil {
			for _, g := range v.guards {
				n.add(reach{cr: g.cr, table: g.table, why: "its body names view " + name})
			}
			for _, t := range v.tables {
				n.calls = append(n.calls, op.triggers[t]...)
			}
		}
		for _, m := range []map[string]*hiddenNode{op.procs, op.funcs} {
			if callee := m[name]; callee != nil && callee != n {
				n.calls = append(n.calls, callee)
			}
		}
		if !n.firedByWrites() || name != n.table {
			n.calls = append(n.calls, op.triggers[name]...)
		}
	}
}

// spread gives every node the reaches of the routines it calls and the
// triggers its writes may fire, until nothing changes (calls may recurse).
func spread(nodes []*hiddenNode) {
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			for _, c := range n.calls {
				for _, r := range c.reaches {
					verb := "it calls "
					if c.firedByWrites() {
						verb = "its writes fire "
					}
					if n.add(reach{cr: r.cr, table: r.table, why: verb + c.object() + ", where " + r.why}) {
						changed = true
					}
				}
			}
		}
	}
}

// allowedBy reports whether r lets n run although it may touch r's table.
func (n *hiddenNode) allowedBy(r *Rule) bool {
	if n.firedByWrites() {
		return r.AllowsTrigger(n.name)
	}
	return r.AllowsRoutine(n.name)
}

// hide records the writes n may make that a rule locking writes does not
// allow.
func (b *builder) hide(d *Decision, n *hiddenNode) {
	for _, r := range n.reaches {
		if !r.cr.rule.Locks(ClassWrite) || n.allowedBy(r.cr.rule) {
			continue
		}
		b.hit(d, r.cr.rule)
		d.raise(ClassWrite)
		b.hidden = append(b.hidden, Hidden{Rule: r.cr.rule, Table: r.table, Object: n.object(), Reason: r.why})
	}
}

// matchHidden finds the writes f makes through the procedure it calls, the
// functions it (or a view it reads) calls, and the triggers on the tables
// it writes.
func (rs *RuleSet) matchHidden(b *builder, d *Decision, f *parser.Facts, currentDB string) {
	if f.Procedure != "" {
		rs.matchProcedure(b, d, f.Procedure)
	}
	if rs.objects == nil || f.Kind == parser.KindDDL {
		return // DDL names functions (CREATE VIEW ... f()) without calling them
	}
	calls := f.Calls
	for _, ref := range f.Tables {
		schema := refSchema(ref, currentDB)
		if v := rs.view(schema, ref.Name); v != nil {
			calls = appendNew(append([]string(nil), calls...), v.calls...)
		}
	}
	for _, c := range calls {
		if n := rs.objects.funcs[c]; n != nil {
			b.hide(d, n)
		}
	}
	events := triggerEvents(f)
	if len(events) == 0 {
		return
	}
	for _, ref := range f.Tables {
		if ref.Write {
			rs.matchTriggers(b, d, refSchema(ref, currentDB), ref.Name, events)
		}
	}
}

func (rs *RuleSet) matchProcedure(b *builder, d *Decision, name string) {
	if rs.objects != nil {
		if n := rs.objects.procs[name]; n != nil {
			b.hide(d, n)
			return
		}
	}
	why := "lockproxy could not read the primary's stored routines"
	if rs.objects != nil {
		why = "lockproxy's backend user cannot see it"
	}
	n := &hiddenNode{kind: "procedure", name: name}
	rs.touchAll(n, why)
	b.hide(d, n)
}

// matchTriggers hides the writes of the triggers that a write to
// schema.table (a base table, or a view of base tables) fires.
func (rs *RuleSet) matchTriggers(b *builder, d *Decision, schema, table string, events []string) {
	tables := []string{schema + "." + table}
	if v := rs.view(schema, table); v != nil {
		tables = v.tables
	}
	for _, t := range tables {
		for _, n := range rs.objects.triggers[t] {
			if contains(events, n.event) {
				b.hide(d, n)
			}
		}
	}
}

// triggerEvents are the trigger events a statement of f's kind may fire
// on the tables it writes.
func triggerEvents(f *parser.Facts) []string {
	switch f.Kind {
	case parser.KindInsert:
		if f.Insert != nil && len(f.Insert.OnDuplicate) > 0 {
			return []string{"INSERT", "UPDATE"}
		}
		return []string{"INSERT"}
	case parser.KindReplace:
		return []string{"INSERT", "DELETE"}
	case parser.KindUpdate:
		return []string{"UPDATE"}
	case parser.KindDelete:
		return []string{"DELETE"}
	case parser.KindLoadData:
		return []string{"INSERT", "UPDATE", "DELETE"}
	}
	return nil
}

// matchHiddenLex is matchHidden for text the parser rejected: every
// routine its words name, and every trigger on a table it names, counts.
func (rs *RuleSet) matchHiddenLex(b *builder, d *Decision, a *parser.Analysis, currentDB string) {
	if rs.objects == nil {
		return
	}
	db := strings.ToLower(currentDB)
	for _, w := range parser.LexNames(a.SQL) {
		ref := qualify(w, db)
		name := ref.Schema + "." + ref.Name
		for _, m := range []map[string]*hiddenNode{rs.objects.procs, rs.objects.funcs} {
			if n := m[name]; n != nil {
				b.hide(d, n)
			}
		}
	}
	for _, ref := range a.LexTables {
		rs.matchTriggers(b, d, refSchema(ref, currentDB), ref.Name, []string{"INSERT", "UPDATE", "DELETE"})
	}
}

func refSchema(ref parser.TableRef, currentDB string) string {
	if ref.Schema == "" {
		return strings.ToLower(currentDB)
	}
	return ref.Schema
}

// hiddenMessage is the reason a hidden write is rejected.
func hiddenMessage(h Hidden) string {
	key := "allow_routines"
	if strings.HasPrefix(h.Object, "trigger ") {
		key = "allow_triggers"
	}
	return fmt.Sprintf("rule %s: %s may write %s where lockproxy cannot lock its rows (%s); statement not run (the rule's %s lets it run unlocked)",
		h.Rule.Name, h.Object, h.Table, h.Reason, key)
}
