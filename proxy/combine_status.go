package proxy

// What combining tells operators and tests: the rules found unfit for
// it, a rule's summary for SHOW LOCKPROXY RULES, EXPLAIN's answer for an
// UPDATE, and the hook tests use to fail a batch at a stage.

import (
	"fmt"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// combineHook, when set (tests), runs at each stage of a batch named
// by stage ("before commit", "commit sent") on the leader's backend
// connection; an error it returns is the connection failing there.
type combineHook func(stage string, b *backendConn) error

// atStage runs the hook, if any.
func (c *combiner) atStage(stage string, b *backendConn) error {
	c.mu.Lock()
	h := c.hook
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(stage, b)
}

// setHook installs h (tests).
func (c *combiner) setHook(h combineHook) {
	c.mu.Lock()
	c.hook = h
	c.mu.Unlock()
}

// markUnfit turns combining off for a rule whose column the batch found
// unfit (not a signed integer, several rows for a key), for as long as
// the rules rs are in force.
func (c *combiner) markUnfit(rs *rules.RuleSet, rule string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unfit == nil {
		c.unfit = map[string]*rules.RuleSet{}
	}
	c.unfit[rule] = rs
}

// isUnfit reports whether markUnfit turned rule off under rs.
func (c *combiner) isUnfit(rs *rules.RuleSet, rule string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unfit[rule] == rs && rs != nil
}

// combineSummary is SHOW LOCKPROXY RULES' combine column: what the rule
// combines, "" when it does not.
func combineSummary(r *rules.Rule) string {
	switch {
	case r.Combine == nil:
		return ""
	case !r.Combines():
		return "off (the rule observes)"
	}
	return fmt.Sprintf("max_batch %d, hold_window %s: autocommit UPDATE SET %s = %s ± n by the whole key, at most a floor on %s",
		r.Combine.MaxBatch, r.Combine.HoldWindow, r.Rewrite.Column, r.Rewrite.Column, r.Rewrite.Column)
}

// explainCombine is explain's word on combining an UPDATE planned as
// p: "" when no combining rule guards its table.
func explainCombine(p plan, inTxn bool) string {
	rule, an := p.rewrite.rule, p.an
	if rule == nil || rule.Combine == nil || an == nil || an.Unparsed || len(an.Stmts) != 1 || an.Stmts[0].Kind != parser.KindUpdate {
		return ""
	}
	why := ""
	switch {
	case !rule.Combines():
		why = "the rule observes"
	case inTxn:
		why = "in a transaction or autocommit off"
	case p.needParams: // keys come at execute time
		if p.fence.rule != nil || p.storedCode {
			why = "fenced, stored code, a trigger or a cascading foreign key"
		}
	default:
		why = planCombineRefusal(p)
	}
	if why != "" {
		return "no (" + why + ")"
	}
	params := make([]any, an.Params)
	for i := range params {
		params[i] = int64(1) // an execute's integers; other types are not combined
	}
	c, reason, err := parser.CombineUpdate(an.Stmts[0], rule.Rewrite.Column, rule.Key, params)
	switch {
	case err != nil:
		return "no (" + err.Error() + ")"
	case reason != "":
		return "no (" + reason + ")"
	}
	floor := "no floor"
	if c.HasFloor && an.Params == 0 {
		floor = fmt.Sprintf("floor %s >= %d", rule.Rewrite.Column, c.Floor)
	} else if c.HasFloor {
		floor = "a floor on " + rule.Rewrite.Column
	}
	note := ""
	if an.Params > 0 {
		note = "; prepared: when its parameters are integers"
	}
	return fmt.Sprintf("yes, in a batch when others of its row are in flight on the instance (%s%s); with its row idle it runs as it would without combining", floor, note)
}
