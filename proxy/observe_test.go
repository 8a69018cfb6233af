package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// observeSku is lockRules with sku-stock in observe mode and hot-row
// still enforcing.
func observeSku(db string) func(*rules.Config) {
	return func(c *rules.Config) {
		lockRules(db, 0)(c)
		c.Rules[0].Mode = rules.ModeObserve
		c.Rules[1].Mode = rules.ModeEnforce
	}
}

// TestObserveMode runs, through one proxy, what sku-stock (observe) would
// refuse or make wait and what hot-row (enforce) does refuse: the observed
// statements run untouched, counted and audited; the enforced ones are
// refused as before.
func TestObserveMode(t *testing.T) {
	_, db := lockSchema(t)
	core, logs := observer.New(zapcore.DebugLevel)
	p := observedProxy(t, observed{log: zap.New(core), edit: observeSku(db), locker: memLocker})
	a, b := p.db(t, db, ""), p.db(t, db, "")
	ctx := context.Background()

	t.Run("would_wait", func(t *testing.T) {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		var stock int
		if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
			t.Fatal(err)
		}
		// Enforced, this UPDATE would wait 30s for a's lock; observed it
		// runs at once, as it does without lockproxy.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := b.ExecContext(wctx, "UPDATE sku SET stock = 7 WHERE sku_id = 1"); err != nil {
			t.Fatalf("observed UPDATE of a row another session reads: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := value(t, p.reg, "lockproxy_observed_total", "outcome=would_wait,reason=,rule=sku-stock"); got != 1 {
			t.Errorf("would_wait = %v, want 1", got)
		}
		if got := value(t, p.reg, "lockproxy_observed_total", "outcome=would_lock,reason=,rule=sku-stock"); got != 2 {
			t.Errorf("would_lock = %v, want 2 (the read and the write)", got)
		}
		// The read would have run as a current read: a rewrite of its text.
		if got := value(t, p.reg, "lockproxy_observed_total", "outcome=would_rewrite,reason=,rule=sku-stock"); got != 1 {
			t.Errorf("would_rewrite = %v, want 1", got)
		}
		lines := logs.FilterLoggerName("audit").FilterMessage("observe: would_wait").All()
		if len(lines) != 1 {
			t.Fatalf("want one would_wait audit line, got %v", logs.FilterLoggerName("audit").All())
		}
		f := lines[0].ContextMap()
		if f["rule"] != "sku-stock" || f["statement"] != "update `sku` set `stock` = ? where `sku_id` = ?" {
			t.Errorf("audit line: %v", f)
		}
		if hs, _ := f["holders"].([]any); len(hs) != 1 {
			t.Errorf("holders = %v, want the reading session", f["holders"])
		}
		if keys, _ := f["keys"].([]any); len(keys) != 1 || !strings.Contains(keys[0].(string), "sku") {
			t.Errorf("keys = %v", f["keys"])
		}
	})

	t.Run("would_refuse", func(t *testing.T) {
		res, err := a.Exec("UPDATE sku SET stock = 3")
		if err != nil {
			t.Fatalf("observed unkeyed UPDATE refused: %v", err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			t.Errorf("unkeyed UPDATE changed %d rows, want 2", n)
		}
		if got := value(t, p.reg, "lockproxy_observed_total", "outcome=would_refuse,reason=unkeyed,rule=sku-stock"); got != 1 {
			t.Errorf("would_refuse{unkeyed} = %v, want 1", got)
		}
		// The enforcing rule still refuses.
		if _, err := a.Exec("UPDATE hot SET v = 1"); err == nil || !strings.Contains(err.Error(), "lockproxy: rule hot-row") {
			t.Errorf("enforced unkeyed UPDATE: %v, want refused naming hot-row", err)
		}
		if got := value(t, p.reg, "lockproxy_statements_rejected_total", "reason=unkeyed,rule=sku-stock"); got != 0 {
			t.Errorf("observed rule counted a rejection: %v", got)
		}
	})

	t.Run("enforce and observe in one statement", func(t *testing.T) {
		// Unkeyed for both: hot-row refuses it, whatever sku-stock says.
		_, err := a.Exec("UPDATE sku JOIN hot ON hot.id = sku.sku_id SET sku.stock = 1, hot.v = 2")
		if err == nil || !strings.Contains(err.Error(), "hot-row") {
			t.Errorf("statement on an enforced and an observed table: %v, want refused by hot-row", err)
		}
	})
	t.Run("keyed on an enforced and an observed table", func(t *testing.T) {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.Exec("UPDATE sku JOIN hot ON hot.id = sku.sku_id SET sku.stock = 1, hot.v = 2 WHERE sku.sku_id = 2 AND hot.id = 1"); err != nil {
			t.Fatal(err)
		}
		var held []string
		for _, l := range p.srv.Locks() {
			if l.State == "held" {
				held = append(held, l.Rule+" "+l.Key)
			}
		}
		// hot-row's lock is taken; sku-stock's row only noted, beside
		// the locks.
		want := []string{"hot-row " + db + ".hot/1"}
		slices.Sort(held)
		if !slices.Equal(held, want) {
			t.Errorf("held %v, want %v", held, want)
		}
	})
	waitReleased(t, p)
	testbed.Eventually(t, 10*time.Second, "locks given back", func() bool { return len(p.srv.Locks()) == 0 })
}
