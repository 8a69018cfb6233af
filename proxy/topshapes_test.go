package proxy

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopShapesCountsAndEvicts: counts per rule, outcome, reason and
// shape are exact while a rule and outcome has at most shapeTracked
// shapes; past that a new shape replaces the least counted one, the
// heavy shapes stay, and no more than shapeTop series per rule and
// outcome are ever exported.
func TestTopShapesCountsAndEvicts(t *testing.T) {
	ts := newTopShapes()
	for range 5 {
		ts.add("r", wouldRefuse, refuseUnkeyed, "update `t` set `a` = ?")
	}
	for range 3 {
		ts.add("r", wouldRefuse, refuseStoredCode, "update `t` set `a` = ?")
		ts.add("r", wouldWait, "", "update `t` set `a` = ? where `id` = ?")
	}
	ts.add("other", wouldRefuse, refuseUnkeyed, "delete from `t`")
	want := []ObservedShape{
		{Rule: "other", Outcome: wouldRefuse, Reason: refuseUnkeyed, Shape: "delete from `t`", Count: 1},
		{Rule: "r", Outcome: wouldRefuse, Reason: refuseUnkeyed, Shape: "update `t` set `a` = ?", Count: 5},
		{Rule: "r", Outcome: wouldRefuse, Reason: refuseStoredCode, Shape: "update `t` set `a` = ?", Count: 3},
		{Rule: "r", Outcome: wouldWait, Shape: "update `t` set `a` = ? where `id` = ?", Count: 3},
	}
	if got := ts.top(shapeTop); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("top:\n got  %v\n want %v", got, want)
	}

	// Fill r's would_refuse far past what is tracked: two heavy shapes
	// among 1000 light ones.
	for i := range 1000 {
		ts.add("r", wouldRefuse, refuseUnkeyed, fmt.Sprintf("update `t%d` set `a` = ?", i))
		if i%10 == 0 {
			ts.add("r", wouldRefuse, refuseUnkeyed, "update `heavy` set `a` = ?")
		}
	}
	ts.mu.Lock()
	tracked := len(ts.groups[shapeGroup{"r", wouldRefuse}])
	ts.mu.Unlock()
	if tracked != shapeTracked {
		t.Errorf("%d shapes tracked for one rule and outcome, want %d", tracked, shapeTracked)
	}
	top := ts.top(shapeTop)
	var refused []ObservedShape
	for _, s := range top {
		if s.Rule == "r" && s.Outcome == wouldRefuse {
			refused = append(refused, s)
		}
	}
	if len(refused) != shapeTop {
		t.Fatalf("%d would_refuse shapes exported for r, want %d: %v", len(refused), shapeTop, refused)
	}
	// The heavy shape (100 statements) comes first; space-saving may
	// overcount it by at most Over, never undercount.
	if h := refused[0]; h.Shape != "update `heavy` set `a` = ?" || h.Count < 100 || h.Count-h.Over > 100 {
		t.Errorf("first shape %+v, want the heavy one counted 100 (+ at most over_count)", h)
	}
	// Its would_wait shape is untouched by the other group's evictions.
	if w := top[len(top)-1]; w.Outcome != wouldWait || w.Count != 3 || w.Over != 0 {
		t.Errorf("would_wait shape after evictions elsewhere: %+v", w)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ts)
	if n, err := testutil.GatherAndCount(reg, "lockproxy_observed_top_shapes"); err != nil || n != 1+shapeTop+1 {
		t.Errorf("exported %d series (%v), want %d (other, r's top would_refuse, r's would_wait)", n, err, 1+shapeTop+1)
	}

	// A rule moved to enforce (or removed) has its shapes forgotten.
	ts.keep(&rules.Config{Rules: []rules.Rule{{Name: "r", Mode: rules.ModeObserve}, {Name: "other", Mode: rules.ModeEnforce}}})
	for _, s := range ts.top(shapeTop) {
		if s.Rule != "r" {
			t.Errorf("shape of a rule no longer observing kept: %+v", s)
		}
	}
}

// TestShapeLabel: a label is valid UTF-8 and at most shapeLabelMax bytes,
// cut at a character boundary.
func TestShapeLabel(t *testing.T) {
	long := "select " + strings.Repeat("`é`, ", 100) + "?"
	for _, in := range []string{long, "update `t\xff` set `a` = ?", "", "select ?"} {
		got := shapeLabel(in)
		if !utf8.ValidString(got) || len(got) > shapeLabelMax || got == "" {
			t.Errorf("shapeLabel(%q) = %q (%d bytes)", in, got, len(got))
		}
	}
	if got := shapeLabel(long); !strings.HasSuffix(got, "...") || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("long shape cut as %q", got)
	}
	if got := shapeLabel("select ?"); got != "select ?" {
		t.Errorf("short shape changed: %q", got)
	}
}
