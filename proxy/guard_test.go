package proxy

import (
	"testing"

	"github.com/lockproxy/lockproxy/rules"
)

// TestGuardKeysOfFencedRulesAreNotHandedOff: a key any matched rule fences
// must come from the lock service at every grant (a new fence), so the
// guard marks it NoHandoff; keys of unfenced rules may be handed off.
func TestGuardKeysOfFencedRulesAreNotHandedOff(t *testing.T) {
	plain := &rules.Rule{Name: "plain"}
	fenced := &rules.Rule{Name: "fenced", Fence: "fence"}
	for _, tc := range []struct {
		name  string
		rules []*rules.Rule
		want  bool
	}{
		{"unfenced", []*rules.Rule{plain}, false},
		{"fenced", []*rules.Rule{fenced}, true},
		{"fenced second", []*rules.Rule{plain, fenced}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g guard
			g.add(rules.Decision{Rule: tc.rules[0], Rules: tc.rules, Keys: []rules.Key{{Name: "k", Rule: tc.rules[0].Name}}}, rules.LockConfig{})
			if len(g.keys) != 1 || g.keys[0].NoHandoff != tc.want {
				t.Fatalf("keys %+v; want one with NoHandoff %v", g.keys, tc.want)
			}
		})
	}
}
