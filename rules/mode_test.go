package rules

import (
	"strings"
	"testing"
)

// TestOneModePerTable: rules guarding one table (by name, or by name in
// any database) must agree on their mode. A row's lock key names one
// rule, so an observing rule listed first would take the key out of the
// enforcing rule's locks.
func TestOneModePerTable(t *testing.T) {
	const head = "users: [{user: app, password: x}]\nbackends:\n  primary: 127.0.0.1:3306\nlocks:\n  backend: memory\nrules:\n"
	rule := func(name, table, mode string) string {
		return "  - name: " + name + "\n    table: " + table + "\n    key: [id]\n    mode: " + mode + "\n"
	}
	for _, c := range []struct {
		name, rules string
		bad         bool
	}{
		{"one table, observe then enforce", rule("a", "shop.t", "observe") + rule("b", "t", "enforce"), true},
		{"one table, enforce then observe", rule("a", "shop.t", "enforce") + rule("b", "shop.t", "observe"), true},
		{"one table, both observe", rule("a", "shop.t", "observe") + rule("b", "t", "observe"), false},
		{"two tables", rule("a", "shop.t", "observe") + rule("b", "shop.u", "enforce"), false},
	} {
		_, err := LoadBytes("t.yaml", []byte(head+c.rules))
		switch {
		case c.bad && (err == nil || !strings.Contains(err.Error(), "rules[1].mode") || !strings.Contains(err.Error(), "need one mode")):
			t.Errorf("%s: %v, want an error naming rules[1].mode", c.name, err)
		case !c.bad && err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
