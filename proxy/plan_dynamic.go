package proxy

// Planning dynamic SQL: what the session's user variables and SQL-level
// prepared statements hold, followed through PREPARE, EXECUTE and
// EXECUTE IMMEDIATE.

import (
	"fmt"

	"github.com/lockproxy/lockproxy/parser"
)

// noteVars records what a statement does to user variables.
func (pl *planner) noteVars(f *parser.Facts) {
	e := f.Effects
	for i, name := range e.UserVars {
		v := parser.Value{Kind: parser.ValueExpr}
		if i < len(e.UserVarValues) {
			v = e.UserVarValues[i]
		}
		pl.p.dyn.setVar(name, v)
	}
	if e.UserVarAssign || e.SelectInto {
		// @v := expr and SELECT ... INTO @v: which variables and what
		// values is not tracked.
		pl.p.dyn.unknownVars = true
	}
	if pl.env.rs.RunsStoredCode(f, pl.env.db) {
		// A function, procedure or trigger may SET @v or PREPARE.
		pl.p.dyn.unknownAll = true
	}
}

// prepare plans PREPARE name FROM 'text' | @var: the statement it names is
// analysed now and planned at each EXECUTE.
func (pl *planner) prepare(f *parser.Facts) {
	sp := f.Prepared
	text, known := sp.SQL, true
	if sp.FromVar != "" {
		text, known = pl.varText(sp.FromVar)
	}
	if !known {
		pl.p.dyn.prepare(sp.Name, nil)
		pl.refuseUnseen(fmt.Sprintf("PREPARE %s FROM @%s: the value of @%s is not known to lockproxy", sp.Name, sp.FromVar, sp.FromVar))
		return
	}
	pl.p.dyn.prepare(sp.Name, pl.env.analyze(text))
}

// varText returns the text a user variable holds when it is known.
func (pl *planner) varText(name string) (string, bool) {
	v, ok := pl.lookupVar(name)
	if !ok || (v.Kind != parser.ValueString && v.Kind != parser.ValueHex) {
		return "", false
	}
	return v.Str, true
}

// execute plans EXECUTE name [USING @a, ...] as the statement it names,
// bound to the variables' values.
func (pl *planner) execute(name string, using []string, usingOther bool, depth int) {
	an, known := pl.lookupPrepared(name)
	if !known || an == nil || depth >= maxDynamicDepth {
		pl.refuseUnseen(fmt.Sprintf("EXECUTE %s: lockproxy did not see the statement prepared under that name", name))
		pl.p.readsDiag = true
		pl.p.dyn.unknownAll = true
		pl.p.changesMode = true
		return
	}
	params := make([]any, 0, len(using))
	for _, u := range using {
		v, ok := pl.lookupVar(u)
		if !ok {
			v = parser.Value{Kind: parser.ValueExpr, Text: "@" + u}
		}
		params = append(params, v)
	}
	if usingOther {
		for len(params) < an.Params {
			params = append(params, parser.Value{Kind: parser.ValueExpr})
		}
	}
	pl.text(an, params, depth+1)
}

// immediate plans EXECUTE IMMEDIATE as the statement its text holds.
func (pl *planner) immediate(im parser.Immediate, depth int) {
	text, known := im.SQL, im.SQL != ""
	if im.FromVar != "" {
		text, known = pl.varText(im.FromVar)
	}
	if !known {
		pl.refuseUnseen("EXECUTE IMMEDIATE: lockproxy cannot see the statement text")
		pl.p.readsDiag = true
		pl.p.dyn.unknownAll = true
		pl.p.changesMode = true
		return
	}
	const name = "\x00immediate"
	pl.p.dyn.prepare(name, pl.env.analyze(text))
	pl.execute(name, im.Using, im.UsingOther, depth)
	delete(pl.p.dyn.prepared, name)
}

// lookupPrepared finds a SQL-level prepared statement, this command's
// changes first.
func (pl *planner) lookupPrepared(name string) (*parser.Analysis, bool) {
	if an, ok := pl.p.dyn.prepared[name]; ok {
		return an, an != nil
	}
	if pl.p.dyn.unknownAll || pl.env.dyn == nil {
		return nil, false
	}
	an, ok := pl.env.dyn.prepared[name]
	return an, ok && an != nil
}

// lookupVar finds a user variable's known value, this command's changes
// first.
func (pl *planner) lookupVar(name string) (parser.Value, bool) {
	if v, ok := pl.p.dyn.vars[name]; ok {
		return v, v.Kind != parser.ValueExpr
	}
	if pl.p.dyn.unknownVars || pl.p.dyn.unknownAll || pl.env.dyn == nil {
		return parser.Value{}, false
	}
	v, ok := pl.env.dyn.vars[name]
	return v, ok && v.Kind != parser.ValueExpr
}
