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

// KnowsObjects reports whether the rules were compiled with the schema's
// triggers, foreign keys and routines (a schema read from the primary):
// only then does RunsStoredCode know a table has none.
func (rs *RuleSet) KnowsObjects() bool { return rs != nil && rs.objects != nil }
