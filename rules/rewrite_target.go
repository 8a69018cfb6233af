package rules

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// RewriteTarget finds the rule with a rewrite plan that guards the one
// table f touches, and the keys of the rows f names there, binding
// placeholders from params (execute-time values; nil for text) and
// reading text values in the session's character sets cs. It
// ignores the rule's lock classes: a rule may rewrite without locking.
// ok is false when f touches several tables, no rewrite rule guards the
// table, or its rows cannot be pinned to keys.
func (rs *RuleSet) RewriteTarget(f *parser.Facts, currentDB string, params []any, cs TextCharsets) (r *Rule, keys []Key, ok bool) {
	return rs.target(f, currentDB, params, cs, func(r *Rule) bool { return r.Rewrite != nil })
}

// FenceTarget is RewriteTarget for the rule with a fence column guarding
// the one table f touches.
func (rs *RuleSet) FenceTarget(f *parser.Facts, currentDB string, params []any, cs TextCharsets) (r *Rule, keys []Key, ok bool) {
	return rs.target(f, currentDB, params, cs, func(r *Rule) bool { return r.Fence != "" })
}

// target finds the first rule accepted by want guarding the one table f
// touches, and the keys of the rows f names there.
func (rs *RuleSet) target(f *parser.Facts, currentDB string, params []any, cs TextCharsets, want func(*Rule) bool) (r *Rule, keys []Key, ok bool) {
	if rs == nil || f == nil || len(f.Tables) != 1 {
		return nil, nil, false
	}
	ref := f.Tables[0]
	schema := ref.Schema
	if schema == "" {
		schema = strings.ToLower(currentDB)
	}
	for _, cr := range rs.rulesFor(schema, ref.Name) {
		if !want(cr.rule) {
			continue
		}
		b := builder{cs: cs}
		var d Decision
		rs.keysFor(&b, f, ref, schema, cr)
		d = b.finish(d)
		if d.NeedParams {
			d = d.Bind(params)
		}
		if len(d.Unkeyed) > 0 || len(d.Keys) == 0 {
			return nil, nil, false
		}
		return cr.rule, d.Keys, true
	}
	return nil, nil, false
}
