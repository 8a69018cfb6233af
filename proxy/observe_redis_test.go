package proxy

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// sharedRedisLocker builds, for each proxy that calls it, a redislock
// Locker on one Redis key prefix: the proxies are instances sharing a
// lock service.
func sharedRedisLocker(t *testing.T) func(*testing.T, *lockmgr.Metrics, *zap.Logger) lockmgr.Locker {
	rdb, prefix := testRedis(t)
	return func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
		return redislock.New(rdb, &redislock.Options{TTL: 5 * time.Second, Prefix: prefix, Logger: log, Metrics: m})
	}
}

// TestObserveWouldWaitRedis: three instances on one Redis, one enforcing
// sku-stock and two observing it. An observed statement counts would_wait,
// naming the other holder, exactly when enforcing would have made it
// wait: behind a lock an enforcing session holds, or behind an observing
// session of another instance that came first in its transaction; not on
// a row nobody holds, and not again for a key its transaction already
// noted. It is never held back: it is answered while the other holds on.
func TestObserveWouldWaitRedis(t *testing.T) {
	_, db := lockSchema(t)
	locker := sharedRedisLocker(t)
	enforcing := observedProxy(t, observed{edit: lockRules(db, 0), locker: locker})
	core1, logs1 := observer.New(zapcore.InfoLevel)
	o1 := observedProxy(t, observed{log: zap.New(core1), edit: observeSku(db), locker: locker})
	core2, logs2 := observer.New(zapcore.InfoLevel)
	o2 := observedProxy(t, observed{log: zap.New(core2), edit: observeSku(db), locker: locker})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	count := func(p *testProxy, outcome string) float64 {
		return value(t, p.reg, "lockproxy_observed_total", "outcome="+outcome+",reason=,rule=sku-stock")
	}
	begin := func(d *sql.DB) *sql.Tx {
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx
	}
	read := func(tx *sql.Tx, sku int) {
		t.Helper()
		var stock int
		if err := tx.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = ?", sku).Scan(&stock); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("behind an enforcing holder", func(t *testing.T) {
		holder := begin(enforcing.db(t, db, ""))
		read(holder, 1) // enforced: sku 1's lock is held until the transaction ends
		watcher := begin(o1.db(t, db, ""))
		read(watcher, 1)
		// Answered while the holder still holds: the check waited for
		// no one, and o1 never queued.
		if !holdsKey(enforcing, db+".sku/1") {
			t.Fatal("the enforcing session no longer holds sku 1")
		}
		for _, e := range o1.srv.locker.Snapshot() {
			t.Errorf("the observing instance lists %+v", e)
		}
		if got := count(o1, "would_wait"); got != 1 {
			t.Errorf("would_wait = %v, want 1", got)
		}
		if got := count(o1, "would_lock"); got != 1 {
			t.Errorf("would_lock = %v, want 1", got)
		}
		wantHolder(t, logs1, enforcing.srv.instance+"/")
		if err := watcher.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("nobody holds the row", func(t *testing.T) {
		if _, err := o1.db(t, db, "").ExecContext(ctx, "UPDATE sku SET stock = stock WHERE sku_id = 2"); err != nil {
			t.Fatal(err)
		}
		if got := count(o1, "would_lock"); got != 2 {
			t.Errorf("would_lock = %v, want 2", got)
		}
		if got := count(o1, "would_wait"); got != 1 {
			t.Errorf("would_wait = %v, want still 1", got)
		}
	})

	t.Run("two observing instances race", func(t *testing.T) {
		first, second := begin(o1.db(t, db, "")), begin(o2.db(t, db, ""))
		read(first, 2)
		read(second, 2)
		read(first, 2)  // first in line: it would hold the row, and waits for no one
		read(second, 2) // already waited for it in this transaction
		if got := count(o2, "would_wait"); got != 1 {
			t.Errorf("second instance: would_wait = %v, want 1", got)
		}
		if got := count(o1, "would_wait"); got != 1 {
			t.Errorf("first instance: would_wait = %v, want still 1 (from the enforcing holder)", got)
		}
		wantHolder(t, logs2, o1.srv.instance+"/observe/")
		if err := first.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := second.Commit(); err != nil {
			t.Fatal(err)
		}
		// The notes ended with the transactions: nobody is in the way.
		read(begin(o2.db(t, db, "")), 2)
		if got := count(o2, "would_wait"); got != 1 {
			t.Errorf("second instance after both committed: would_wait = %v, want still 1", got)
		}
		if got := count(o2, "would_lock"); got != 3 {
			t.Errorf("second instance: would_lock = %v, want 3", got)
		}
	})
}

// holdsKey reports whether p's Locker lists key as held.
func holdsKey(p *testProxy, key string) bool {
	for _, l := range p.srv.Locks() {
		if l.State == "held" && l.Key == key {
			return true
		}
	}
	return false
}

// wantHolder checks the last would_wait audit line names one holder,
// starting with prefix.
func wantHolder(t *testing.T, logs *observer.ObservedLogs, prefix string) {
	t.Helper()
	lines := logs.FilterLoggerName("audit").FilterMessage("observe: would_wait").All()
	if len(lines) == 0 {
		t.Fatal("no would_wait audit line")
	}
	hs, _ := lines[len(lines)-1].ContextMap()["holders"].([]any)
	if len(hs) != 1 || !strings.HasPrefix(hs[0].(string), prefix) {
		t.Errorf("holders = %v, want one starting with %q", hs, prefix)
	}
}
