package rules

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// reach is a guarded table that a view, routine or trigger may touch, the
// rule guarding it, and why lockproxy thinks so.
type reach struct {
	cr    *compiledRule
	table string // schema.table
	why   string
}

// viewPlan is what the rules make of one view.
type viewPlan struct {
	name   string   // schema.view
	guards []reach  // guarded tables it reads, directly or through views
	tables []string // every base table it reads, schema.table
	calls  []string // functions its definition calls, directly or through views
	// proj maps the view's columns onto one base table when the view is a
	// plain projection (through other such views); nil otherwise, and
	// notPlain says why.
	proj     *parser.Projection
	notPlain string
	// impure says why reading the view may have an effect or answer
	// differently on a replica (a stored function its definition calls,
	// directly or through views; a definition lockproxy cannot read);
	// "" when it calls only pure built-ins (parser.Facts.Impure).
	impure string
}

// viewResolver resolves views against the rules, each once.
type viewResolver struct {
	rs    *RuleSet
	raw   map[string]View
	plans map[string]*viewPlan
	busy  map[string]bool
}

// compileViews resolves every view of objs.
func (rs *RuleSet) compileViews(views []View) map[string]*viewPlan {
	vr := &viewResolver{rs: rs, raw: map[string]View{}, plans: map[string]*viewPlan{}, busy: map[string]bool{}}
	for _, v := range views {
		vr.raw[v.Schema+"."+v.Name] = v
	}
	for name := range vr.raw {
		vr.resolve(name)
	}
	return vr.plans
}

func (vr *viewResolver) resolve(name string) *viewPlan {
	if p, ok := vr.plans[name]; ok {
		return p
	}
	if vr.busy[name] {
		return nil // a cycle: MySQL forbids it; the outer view is resolved without it
	}
	vr.busy[name] = true
	defer delete(vr.busy, name)
	v := vr.raw[name]
	p := &viewPlan{name: name}
	if strings.TrimSpace(v.Definition) == "" {
		p.notPlain = "lockproxy's backend user cannot see its definition"
		p.impure = "view " + name + ": " + p.notPlain
		for _, cr := range vr.rs.all {
			p.guards = append(p.guards, reach{cr: cr, table: ruleTable(cr), why: p.notPlain})
		}
		vr.plans[name] = p
		return p
	}
	for _, ref := range vr.reads(v, p) {
		vr.read(p, ref)
	}
	vr.project(p, v)
	vr.plans[name] = p
	return p
}

// reads returns the tables and views v's definition names, and records the
// functions it calls.
func (vr *viewResolver) reads(v View, p *viewPlan) []parser.TableRef {
	a, err := parser.Analyze(v.Definition, v.Schema)
	if err != nil || a.Unparsed {
		p.impure = "view " + p.name + ": lockproxy cannot parse its definition"
		var refs []parser.TableRef
		for _, n := range parser.LexTables(v.Definition) {
			refs = append(refs, qualify(n, v.Schema))
		}
		return refs
	}
	var refs []parser.TableRef
	for _, f := range a.Stmts {
		refs = append(refs, f.Tables...)
		p.calls = appendNew(p.calls, f.Calls...)
		if p.impure == "" && (f.Impure != "" || f.Effects.Any()) {
			p.impure = "view " + p.name + " " + f.Impure
			if f.Impure == "" {
				p.impure = "view " + p.name + " has session effects"
			}
		}
	}
	return refs
}

// read adds what reading ref gives the view p.
func (vr *viewResolver) read(p *viewPlan, ref parser.TableRef) {
	name := ref.Schema + "." + ref.Name
	if _, isView := vr.raw[name]; isView {
		inner := vr.resolve(name)
		if inner == nil {
			return
		}
		p.guards = append(p.guards, inner.guards...)
		p.tables = appendNew(p.tables, inner.tables...)
		p.calls = appendNew(p.calls, inner.calls...)
		if p.impure == "" {
			p.impure = inner.impure
		}
		return
	}
	p.tables = appendNew(p.tables, name)
	for _, cr := range vr.rs.rulesFor(ref.Schema, ref.Name) {
		p.guards = append(p.guards, reach{cr: cr, table: name})
	}
}

// project sets p.proj when v is a plain projection of one base table,
// composing the column maps of views of views.
func (vr *viewResolver) project(p *viewPlan, v View) {
	proj, why := parser.ViewProjection(v.Definition, v.Schema)
	if proj == nil {
		p.notPlain = why
		return
	}
	inner := proj.Schema + "." + proj.Table
	if _, isView := vr.raw[inner]; !isView {
		p.proj = proj
		return
	}
	ip := vr.resolve(inner)
	if ip == nil || ip.proj == nil {
		p.notPlain = "it reads view " + inner
		if ip != nil {
			p.notPlain += ", which " + ip.notPlain
		}
		return
	}
	cols := map[string]string{}
	for vc, ic := range proj.Columns {
		if bc, ok := ip.proj.Columns[ic]; ok {
			cols[vc] = bc
		}
	}
	p.proj = &parser.Projection{Schema: ip.proj.Schema, Table: ip.proj.Table, Columns: cols}
}

// ViewImpure says why f, a read, may have an effect on a replica or
// answer there differently from the primary because of a view it reads
// (see parser.Facts.Impure); "" when every view it reads is pure, or when
// lockproxy knows no views (the replica connection's read-only session is
// then the only guard).
func (rs *RuleSet) ViewImpure(f *parser.Facts, currentDB string) string {
	if rs.objects == nil || len(rs.objects.views) == 0 {
		return "" // every replica read asks: no lookups when there is no view
	}
	for _, ref := range f.Tables {
		if v := rs.view(refSchema(ref, currentDB), ref.Name); v != nil && v.impure != "" {
			return v.impure
		}
	}
	return ""
}

// view returns the plan of schema.name when it is a view.
func (rs *RuleSet) view(schema, name string) *viewPlan {
	if rs.objects == nil {
		return nil
	}
	return rs.objects.views[strings.ToLower(schema+"."+name)]
}

// matchView matches one occurrence of a view: a plain projection of a
// guarded table is keyed like the table, through the column map; any other
// view reading a guarded table cannot be keyed.
func (rs *RuleSet) matchView(b *builder, d *Decision, f *parser.Facts, ref parser.TableRef, v *viewPlan, inTxn bool) {
	class := classOf(f, ref, inTxn)
	b.read = class == ClassReadInTxn
	defer func() { b.read = false }()
	if v.proj != nil {
		mf, mref := throughView(f, ref, v.proj)
		b.via = v.name
		defer func() { b.via = "" }()
		for _, cr := range rs.rulesFor(v.proj.Schema, v.proj.Table) {
			b.hit(d, cr.rule)
			if class == ClassNone || !cr.rule.Locks(class) {
				continue
			}
			d.raise(class)
			rs.keysFor(b, mf, mref, v.proj.Schema, cr)
		}
		return
	}
	for _, g := range v.guards {
		b.hit(d, g.cr.rule)
		if class == ClassNone || !g.cr.rule.Locks(class) {
			continue
		}
		d.raise(class)
		b.unkeyed(g.cr.rule, "", g.table, "through view "+v.name+", which is not a plain projection of one table: "+v.notPlain)
	}
}

// raise makes c the decision's class when it is stronger.
func (d *Decision) raise(c LockClass) {
	if c.rank() > d.Class.rank() {
		d.Class = c
	}
}

// throughView restates f's facts about the view occurrence ref as facts
// about the base table of the projection p: the view's column names in
// conditions, INSERT columns and assignments become the base table's.
func throughView(f *parser.Facts, ref parser.TableRef, p *parser.Projection) (*parser.Facts, parser.TableRef) {
	m := ref
	m.Schema, m.Name = p.Schema, p.Table
	if m.Alias == "" {
		m.Alias = ref.Name // a qualifier naming the view still names this occurrence
	}
	m.Where = mapPredicate(ref.Where, p.Columns)
	mf := *f
	mf.Assignments = mapAssignments(f.Assignments, ref, p.Columns)
	if f.Insert != nil && ref.Write {
		ins := *f.Insert
		ins.Columns = make([]string, len(f.Insert.Columns))
		for i, c := range f.Insert.Columns {
			ins.Columns[i] = mapColumn(c, p.Columns)
		}
		ins.OnDuplicate = mapAssignments(f.Insert.OnDuplicate, ref, p.Columns)
		mf.Insert = &ins
	}
	return &mf, m
}

// mapColumn returns the base column a view column shows ("" when none: it
// then names no key column).
func mapColumn(c string, cols map[string]string) string {
	return cols[c]
}

func mapPredicate(p *parser.Predicate, cols map[string]string) *parser.Predicate {
	if p == nil {
		return nil
	}
	out := &parser.Predicate{Residual: p.Residual, Unkeyed: p.Unkeyed}
	if p.Or == nil {
		return out
	}
	out.Or = make([]parser.Conj, len(p.Or))
	for i, c := range p.Or {
		conj := make(parser.Conj, 0, len(c))
		for _, a := range c {
			if base := mapColumn(a.Column, cols); base != "" {
				conj = append(conj, parser.Atom{Column: base, Value: a.Value})
				continue
			}
			out.Residual = true
		}
		out.Or[i] = conj
	}
	return out
}

func mapAssignments(as []parser.Assignment, ref parser.TableRef, cols map[string]string) []parser.Assignment {
	if len(as) == 0 {
		return as
	}
	out := make([]parser.Assignment, len(as))
	for i, a := range as {
		if a.Table == "" || a.Table == ref.Name || a.Table == ref.Alias {
			a.Column = mapColumn(a.Column, cols)
		}
		out[i] = a
	}
	return out
}

// qualify turns "t" or "db.t" into a TableRef, with db for an unqualified name.
func qualify(name, db string) parser.TableRef {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return parser.TableRef{Schema: name[:i], Name: name[i+1:]}
	}
	return parser.TableRef{Schema: db, Name: name}
}

// ruleTable is the table a rule guards, as rules.yaml names it, lowercased.
func ruleTable(cr *compiledRule) string {
	if cr.db == "" {
		return cr.table
	}
	return cr.db + "." + cr.table
}

func appendNew(list []string, xs ...string) []string {
	for _, x := range xs {
		if !contains(list, x) {
			list = append(list, x)
		}
	}
	return list
}
