package rules

import "slices"

// RewriteTarget is the rule with a rewrite plan that guards the one table
// a SELECT or UPDATE touches (not through a view), and the keys of the
// rows the statement names there, as Match derived them: placeholders
// bound by Bind (before it, ok is false for a rule keyed by
// placeholders), text values read in the session's character sets. It
// ignores the rule's lock classes: a rule may rewrite without locking. ok
// is false when the statement touches several tables, no rewrite rule
// guards the table, or the first that does cannot pin its rows to keys.
func (d Decision) RewriteTarget() (r *Rule, keys []Key, ok bool) {
	return d.target(func(r *Rule) bool { return r.Rewrite != nil })
}

// FenceTarget is RewriteTarget for the rule with a fence column guarding
// the one table an UPDATE or SELECT touches.
func (d Decision) FenceTarget() (r *Rule, keys []Key, ok bool) {
	return d.target(func(r *Rule) bool { return r.Fence != "" })
}

// target is the first rule of d.targets accepted by want and its keys.
func (d Decision) target(want func(*Rule) bool) (r *Rule, keys []Key, ok bool) {
	i := slices.IndexFunc(d.targets, want)
	if i < 0 {
		return nil, nil, false
	}
	r = d.targets[i]
	if slices.Contains(d.tunk, r) || slices.ContainsFunc(d.pending, func(t pendingTuple) bool { return t.rule == r }) {
		return nil, nil, false
	}
	for _, k := range d.tkeys {
		if k.Rule == r.Name {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil, false
	}
	return r, sortKeys(keys), true
}
