package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/rules"
)

// TestWorkloadMatchesLiveProxy: the decisions `lockproxy check` makes
// offline for a session's statements are the ones a live lockproxy makes
// for the same statements: what the observing rule would do is counted
// alike (lockproxy_observed_total, but for would_wait, which only the lock
// service can tell), and the enforcing rule refuses the same statements,
// whether check plans with the live proxy's own schema (check --dsn) or
// with none.
func TestWorkloadMatchesLiveProxy(t *testing.T) {
	_, db := lockSchema(t)
	p := observedProxy(t, observed{edit: observeSku(db), locker: memLocker})
	stmts := []struct {
		sql     string
		refused bool // by the enforcing rule, hot-row
	}{
		{"BEGIN", false},
		{"SELECT stock FROM sku WHERE sku_id = 1", false},
		{"UPDATE sku SET stock = 3 WHERE sku_id = 1", false},
		{"SELECT v FROM hot WHERE id = 1", false},
		{"COMMIT", false},
		{"UPDATE sku SET stock = 0", false},
		{"SELECT stock FROM sku WHERE sku_id IN (1, 2) FOR UPDATE", false},
		{"UPDATE hot SET v = 2", true},
		{"PREPARE s FROM 'UPDATE sku SET stock = ? WHERE sku_id = ?'", false},
		{"SET @a = 5, @b = 2", false},
		{"EXECUTE s USING @a, @b", false},
		{"EXECUTE nobody_prepared", true},
		{"SET NAMES gbk", false},
		{"UPDATE sku SET stock = 4 WHERE sku_id = 2 AND 'é' <> ''", false},
		{"SET NAMES utf8mb4", false},
		{"SET autocommit = 0", false},
		{"SELECT stock FROM sku WHERE sku_id = 2", false},
		{"ROLLBACK", false},
	}
	c, err := p.db(t, db, "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := *p.srv.config()
	bare, err := rules.Compile(&cfg, rules.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		_, err := c.ExecContext(context.Background(), s.sql)
		if (err != nil) != s.refused {
			t.Fatalf("%s: live error %v, want refused %v", s.sql, err, s.refused)
		}
	}
	for name, rs := range map[string]*rules.RuleSet{"live schema": p.srv.ruleSet(), "no schema": bare} {
		t.Run(name, func(t *testing.T) {
			w := NewWorkload(rs, false)
			w.Connect(1, db)
			for _, s := range stmts {
				w.Statement(1, s.sql)
			}
			compareWorkload(t, p, w)
		})
	}
}

// compareWorkload compares what w counted with what the live proxy p did.
func compareWorkload(t *testing.T, p *testProxy, w *Workload) {
	t.Helper()
	live := map[string]float64{}
	for k, v := range values(t, p.reg, "lockproxy_observed_total") {
		if v != 0 && !strings.Contains(k, "outcome=would_wait") {
			live[k] = v
		}
	}
	offline := map[string]float64{}
	for k, v := range w.Observed() {
		offline[fmt.Sprintf("outcome=%s,reason=%s,rule=%s", k.Outcome, k.Reason, k.Rule)] = float64(v)
	}
	if fmt.Sprint(live) != fmt.Sprint(offline) {
		t.Errorf("observed counts differ:\n live    %v\n offline %v", live, offline)
	}
	t.Logf("observed, live and offline: %v", live)
	if len(live) < 3 {
		t.Errorf("the workload should lock, rewrite and refuse for the observing rule: %v", live)
	}
	refused := 0
	for _, sd := range w.Shapes() {
		if sd.Example.Reject != "" {
			refused += sd.Count
		}
	}
	if refused != 2 {
		t.Errorf("offline, %d statements refused; live, 2", refused)
	}
}
