package rules

// Combines reports whether some rule combines (Rule.Combines): only then
// does a session watch for what keeps its UPDATEs from being combined.
func (rs *RuleSet) Combines() bool {
	if rs == nil || rs.cfg == nil {
		return false
	}
	for i := range rs.cfg.Rules {
		if rs.cfg.Rules[i].Combines() {
			return true
		}
	}
	return false
}

// Rule returns the rule named name, nil when there is none.
func (rs *RuleSet) Rule(name string) *Rule {
	if rs == nil || rs.cfg == nil {
		return nil
	}
	for i := range rs.cfg.Rules {
		if rs.cfg.Rules[i].Name == name {
			return &rs.cfg.Rules[i]
		}
	}
	return nil
}
