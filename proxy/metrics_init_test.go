package proxy

import (
	"testing"

	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRuleMetricsStartAtZero: the labelled series of lockproxy's own
// metrics exist at 0 from the start (and for a rule added by a reload), so
// a dashboard or an alert on them sees 0 rather than nothing.
func TestRuleMetricsStartAtZero(t *testing.T) {
	rule := func(name string) rules.Rule {
		return rules.Rule{Name: name, Table: "shop." + name, Key: []string{"id"}, Lock: []string{rules.LockWrite},
			OnUnkeyed: rules.OnUnkeyedReject, Fence: "fence"}
	}
	p := startProxy(t, func(c *rules.Config) { c.Rules = []rules.Rule{rule("a")} })
	count := func(name string) int {
		n, err := testutil.GatherAndCount(p.reg, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	want := map[string]int{
		"lockproxy_queries_total":             4, // primary|replica × query|execute
		"lockproxy_backend_errors_total":      2,
		"lockproxy_statements_rejected_total": 2, // unkeyed, unavailable
		"lockproxy_fenced_writes_total":       1,
		"lockproxy_unkeyed_reads_total":       1,
	}
	for name, n := range want {
		if got := count(name); got != n {
			t.Errorf("%s: %d series at start, want %d", name, got, n)
		}
	}
	cfg := *p.srv.config()
	cfg.Rules = []rules.Rule{rule("a"), rule("b")}
	if err := p.srv.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	if got := count("lockproxy_statements_rejected_total"); got != 4 {
		t.Errorf("after a reload adding a rule: %d rejection series, want 4", got)
	}
}
