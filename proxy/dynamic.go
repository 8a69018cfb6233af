package proxy

import "github.com/lockproxy/lockproxy/parser"

// maxDynamic bounds how many SQL-level prepared statements and user
// variables a session's dynState remembers; one beyond is not remembered,
// which only makes lockproxy refuse more (an EXECUTE it cannot see).
const maxDynamic = 1024

// dynState is what lockproxy knows of a session's dynamic SQL: the analysis
// of each statement prepared with PREPARE name FROM ..., and the user
// variables set from literals (the values EXECUTE ... USING binds). A name
// or variable absent from the maps is unknown. Owned by the session's
// goroutine.
type dynState struct {
	prepared map[string]*parser.Analysis
	vars     map[string]parser.Value
}

// dynChanges are what one command does to a dynState if it succeeds.
type dynChanges struct {
	prepared map[string]*parser.Analysis // nil: deallocated, or text unknown
	vars     map[string]parser.Value     // Kind ValueExpr: value unknown
	// unknownVars: some variable got a value lockproxy cannot see
	// (@v := expr, SELECT ... INTO @v); unknownAll: prepared statements
	// too (CALL, unparsed text that may run dynamic SQL).
	unknownVars, unknownAll bool
}

func (c *dynChanges) prepare(name string, an *parser.Analysis) {
	if c.prepared == nil {
		c.prepared = map[string]*parser.Analysis{}
	}
	c.prepared[name] = an
}

func (c *dynChanges) setVar(name string, v parser.Value) {
	if c.vars == nil {
		c.vars = map[string]parser.Value{}
	}
	c.vars[name] = v
}

// apply records a command's changes once its response is known: ok when
// every statement succeeded. After a failure, whatever the command touched
// is unknown (a multi-statement text stops at its first error, and a
// failed PREPARE drops the name it reused).
func (d *dynState) apply(c dynChanges, ok bool) {
	if c.unknownAll || (!ok && c.unknownVars) {
		d.reset()
	} else if c.unknownVars {
		clear(d.vars)
	}
	for name, an := range c.prepared {
		if !ok || an == nil || len(d.prepared) >= maxDynamic {
			delete(d.prepared, name)
			continue
		}
		if d.prepared == nil {
			d.prepared = map[string]*parser.Analysis{}
		}
		d.prepared[name] = an
	}
	for name, v := range c.vars {
		if !ok || v.Kind == parser.ValueExpr || len(d.vars) >= maxDynamic {
			delete(d.vars, name)
			continue
		}
		if d.vars == nil {
			d.vars = map[string]parser.Value{}
		}
		d.vars[name] = v
	}
}

// reset forgets everything: the server dropped the session's prepared
// statements and variables (COM_RESET_CONNECTION, COM_CHANGE_USER).
func (d *dynState) reset() {
	clear(d.prepared)
	clear(d.vars)
}
