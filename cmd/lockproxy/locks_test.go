package main

import (
	"slices"
	"testing"

	"github.com/lockproxy/lockproxy/rules"
)

// TestLockBuildersMatchRules keeps the backends lockproxy can build and the
// names rules.yaml accepts one list: a name validation accepts but nothing
// builds would pass --check and fail at start.
func TestLockBuildersMatchRules(t *testing.T) {
	var built []string
	for name := range lockBuilders {
		built = append(built, name)
	}
	want := slices.Clone(rules.LockBackends)
	slices.Sort(built)
	slices.Sort(want)
	if !slices.Equal(built, want) {
		t.Fatalf("lockBuilders has %v, rules.LockBackends %v", built, want)
	}
	if _, ok := lockBuilders[rules.DefaultLockBackend]; !ok {
		t.Fatalf("the default backend %q cannot be built", rules.DefaultLockBackend)
	}
}
