package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock/redislocktest"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// observed configures observedProxy.
type observed struct {
	log        *zap.Logger // nil: zaptest
	edit       func(*rules.Config)
	authPlugin string
	// locker builds the lock backend on the metrics registered on the
	// proxy's own registry (nil: no locker).
	locker func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker
}

// observedProxy is startProxyOn with the lock metrics on the Server's own
// registry and the log going where the test says, so a test sees every
// series and every line one proxy produces.
func observedProxy(t *testing.T, o observed) *testProxy {
	t.Helper()
	bed := testbed.Get(t)
	if o.log == nil {
		o.log = zaptest.NewLogger(t)
	}
	cfg, err := rules.LoadBytes("test.yaml", fmt.Appendf(nil, "proxy:\n  handshake_timeout: 5s\nusers:\n  - user: %s\n    password: %q\nbackends:\n  primary: %s\nlocks:\n  backend: memory\n",
		bed.User, bed.Password, bed.PrimaryAddr))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if o.edit != nil {
		o.edit(cfg)
	}
	reg := prometheus.NewRegistry()
	var locker lockmgr.Locker
	if o.locker != nil {
		m, err := lockmgr.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		locker = o.locker(t, m, o.log)
		t.Cleanup(func() { _ = locker.Close() }) // after the Server's shutdown below
	}
	return serveProxy(t, bed, cfg, Options{Logger: o.log, Registry: reg, Locker: locker, AuthPlugin: o.authPlugin}, reg)
}

func memLocker(_ *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
	return memlock.New(log, m)
}

// lockRules guards db.sku (waits up to 30s) and db.hot (gives up after
// 200ms, so a held row answers 1205).
func lockRules(db string, slowWait time.Duration) func(*rules.Config) {
	all := []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn}
	return func(c *rules.Config) {
		c.Rules = []rules.Rule{
			{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"}, Lock: all,
				OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(30 * time.Second)},
			{Name: "hot-row", Table: db + ".hot", Key: []string{"id"}, Lock: all,
				OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(200 * time.Millisecond)},
		}
		if slowWait > 0 {
			c.Locks.SlowWait = rules.Duration(slowWait)
		}
	}
}

// lockSchema creates the tables of lockRules directly on the primary.
func lockSchema(t *testing.T) (*testProxy, string) {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE hot (id BIGINT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10)", "INSERT INTO hot VALUES (1, 0)")
	return base, db
}

// families gathers the registry once, by metric name.
func families(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// labelKey renders a series' labels as "k=v,k=v" in name order.
func labelKey(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// values are the series of a counter or gauge family (histograms: their
// sample counts), keyed by labelKey. A family not exported yet is empty.
func values(t *testing.T, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range families(t, g)[name].GetMetric() {
		switch {
		case m.Counter != nil:
			out[labelKey(m)] = m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[labelKey(m)] = m.GetGauge().GetValue()
		case m.Histogram != nil:
			out[labelKey(m)] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// value is one series of values ("" for a family without labels).
func value(t *testing.T, g prometheus.Gatherer, name, labels string) float64 {
	t.Helper()
	return values(t, g, name)[labels]
}

func wantValues(t *testing.T, g prometheus.Gatherer, name string, want map[string]float64) {
	t.Helper()
	if got := values(t, g, name); !maps.Equal(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", name, got, want)
	}
}

// waitReleased waits until nothing is held or waited for: locks are
// given back just after the reply that ends their transaction.
func waitReleased(t *testing.T, p *testProxy) {
	t.Helper()
	testbed.Eventually(t, 10*time.Second, "locks_held and lock_waiters back to 0", func() bool {
		return value(t, p.reg, "lockproxy_locks_held", "") == 0 && value(t, p.reg, "lockproxy_lock_waiters", "") == 0
	})
}

// contend has a take the row stmt writes, in a transaction, and b run
// stmt meanwhile; once ready says b is waiting as the test wants, a
// commits. It returns b's result.
func contend(t *testing.T, a, b *sql.DB, stmt string, ready func() bool) error {
	t.Helper()
	tx, err := a.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(stmt); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := b.Exec(stmt)
		waited <- err
	}()
	testbed.Eventually(t, 10*time.Second, "the second session waits", ready)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return <-waited
}

// TestLockMetrics drives contention through lockproxy and checks that the
// lock series count exactly the guarded statements sent.
func TestLockMetrics(t *testing.T) {
	_, db := lockSchema(t)
	p := observedProxy(t, observed{edit: lockRules(db, 0), locker: memLocker})
	a, b := p.db(t, db, ""), p.db(t, db, "")

	// sku-stock: a holds row 1, b waits for it and gets it; b takes row 2
	// uncontended. Three acquisitions, one of them after a wait.
	heldWhileWaiting := -1.0
	err := contend(t, a, b, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1", func() bool {
		if value(t, p.reg, "lockproxy_lock_waiters", "") != 1 {
			return false
		}
		heldWhileWaiting = value(t, p.reg, "lockproxy_locks_held", "")
		return true
	})
	if err != nil {
		t.Fatalf("the waiter did not get the lock after the commit: %v", err)
	}
	if heldWhileWaiting != 1 {
		t.Errorf("lockproxy_locks_held = %v while one row is held, want 1", heldWhileWaiting)
	}
	testbed.MustExec(t, b, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 2")

	// hot-row: a holds row 1, b gives up with 1205 after 200ms.
	timeoutOnHeldRow(t, a, b, "UPDATE hot SET v = v + 1 WHERE id = 1")

	// An unkeyed write is refused before any lock is asked for.
	_, err = b.Exec("UPDATE sku SET stock = 0")
	if me := mysqlErr(t, err); me.Number != 1105 {
		t.Fatalf("unkeyed write: want 1105, got %v", me)
	}
	waitReleased(t, p)

	wantValues(t, p.reg, "lockproxy_lock_acquire_total", map[string]float64{
		"result=acquired,rule=sku-stock": 3,
		"result=acquired,rule=hot-row":   1,
		"result=timeout,rule=hot-row":    1,
	})
	wantValues(t, p.reg, "lockproxy_lock_wait_seconds", map[string]float64{"rule=sku-stock": 3, "rule=hot-row": 2})
	wantValues(t, p.reg, "lockproxy_lock_hold_seconds", map[string]float64{"rule=sku-stock": 3, "rule=hot-row": 1})
	// Every rule's rejection series exists from the start, at 0.
	wantValues(t, p.reg, "lockproxy_statements_rejected_total", map[string]float64{"reason=unkeyed,rule=sku-stock": 1,
		"reason=unavailable,rule=sku-stock": 0, "reason=unkeyed,rule=hot-row": 0, "reason=unavailable,rule=hot-row": 0,
		"reason=not_current,rule=sku-stock": 0, "reason=not_current,rule=hot-row": 0})
	if lost := values(t, p.reg, "lockproxy_lock_lease_lost_total"); len(lost) != 0 {
		t.Errorf("leases reported lost without a loss: %v", lost)
	}
	t.Run("the contended wait lands above the fastest bucket", func(t *testing.T) {
		// The waiter waited until a's COMMIT, which came only after it was
		// seen waiting: its observation cannot be in the first bucket
		// with the uncontended grants.
		h := families(t, p.reg)["lockproxy_lock_wait_seconds"]
		for _, m := range h.GetMetric() {
			if first := m.GetHistogram().GetBucket()[0]; labelKey(m) == "rule=sku-stock" && first.GetCumulativeCount() > 2 {
				t.Errorf("all %d sku-stock waits in the first bucket (le=%g)", first.GetCumulativeCount(), first.GetUpperBound())
			}
		}
	})
	t.Run("lint", func(t *testing.T) { lint(t, p.reg) })
}

// timeoutOnHeldRow has a hold the row stmt writes while b runs stmt,
// which must give up with 1205.
func timeoutOnHeldRow(t *testing.T, a, b *sql.DB, stmt string) {
	t.Helper()
	tx, err := a.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(stmt); err != nil {
		t.Fatal(err)
	}
	_, err = b.Exec(stmt)
	if me := mysqlErr(t, err); me.Number != 1205 {
		t.Fatalf("want 1205 while the row is held, got %v", me)
	}
}

// lint fails on every promlint problem of the registry's series.
func lint(t *testing.T, g prometheus.Gatherer) {
	t.Helper()
	problems, err := testutil.GatherAndLint(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s", pr.Metric, pr.Text)
	}
}

// TestLeaseLostMetric takes a row lock through lockproxy on Redis, has the
// lock taken over behind its back, and checks the loss is counted and the
// transaction refused.
func TestLeaseLostMetric(t *testing.T) {
	_, db := lockSchema(t)
	rdb, prefix := testRedis(t)
	p := observedProxy(t, observed{edit: lockRules(db, 0), locker: func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
		return redislock.New(rdb, &redislock.Options{TTL: 900 * time.Millisecond, Prefix: prefix, Logger: log, Metrics: m})
	}})
	renewals := func(result string) float64 {
		return value(t, p.reg, "lockproxy_lock_renewals_total", "result="+result)
	}
	a := p.db(t, db, "")
	ctx := context.Background()
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatal(err)
	}
	// Held across a few renewal rounds (every ttl/3): they succeed.
	testbed.Eventually(t, 10*time.Second, "two renewals succeed while the lock is held", func() bool {
		return renewals(lockmgr.RenewOK) >= 2
	})
	lock := redisLockKey(t, rdb, prefix)
	// Another holder's token: the next renewal finds the lock not ours.
	if err := redislocktest.TakeOver(ctx, rdb, lock); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "lockproxy_lock_lease_lost_total{rule=sku-stock} counts the loss", func() bool {
		return value(t, p.reg, "lockproxy_lock_lease_lost_total", "rule=sku-stock") == 1
	})
	err = tx.Commit()
	if me := mysqlErr(t, err); me.Number != 1213 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("COMMIT after the lease was lost: want lockproxy's 1213, got %v", me)
	}
	waitReleased(t, p)
	wantValues(t, p.reg, "lockproxy_lock_lease_lost_total", map[string]float64{"rule=sku-stock": 1})
	wantValues(t, p.reg, "lockproxy_lock_acquire_total", map[string]float64{"result=acquired,rule=sku-stock": 1})
	wantValues(t, p.reg, "lockproxy_lock_hold_seconds", map[string]float64{"rule=sku-stock": 1})
	if lost := renewals(lockmgr.RenewLost); lost != 1 {
		t.Errorf("lockproxy_lock_renewals_total{result=lost} = %v, want 1", lost)
	}
}

// redisLocker builds a redislock Locker on the test bed's Redis under a
// prefix of its own, for observedProxy.
func redisLocker(ttl time.Duration) func(*testing.T, *lockmgr.Metrics, *zap.Logger) lockmgr.Locker {
	return func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
		rdb, prefix := testRedis(t)
		return redislock.New(rdb, &redislock.Options{TTL: ttl, Prefix: prefix, Logger: log, Metrics: m})
	}
}

// testRedis is a client of the test bed's Redis and a key prefix of the
// test's own; the test's keys are deleted and the client closed at its end
// (after a Locker built on them is closed, if registered later).
func testRedis(t *testing.T) (*redis.Client, string) {
	rdb := redis.NewClient(&redis.Options{Addr: testbed.Get(t).RedisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testbed.UniqueName(t)
	t.Cleanup(func() { deleteRedisKeys(rdb, prefix+":*") })
	return rdb, prefix
}

// TestWaitDistributionMetrics: two sessions queue behind a holder; each
// gets the key in turn (two hand-offs), and they started waiting with one
// and two waiters for the key. On the memory and the Redis backend.
func TestWaitDistributionMetrics(t *testing.T) {
	for name, locker := range map[string]func(*testing.T, *lockmgr.Metrics, *zap.Logger) lockmgr.Locker{
		"memory": memLocker, "redis": redisLocker(time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			_, db := lockSchema(t)
			p := observedProxy(t, observed{edit: lockRules(db, 0), locker: locker})
			a, b, c := p.db(t, db, ""), p.db(t, db, ""), p.db(t, db, "")
			stmt := "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"
			tx, err := a.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(stmt); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 2)
			queue := func(db *sql.DB, n float64) {
				go func() { _, err := db.Exec(stmt); waited <- err }()
				testbed.Eventually(t, 10*time.Second, "the waiter queues", func() bool {
					return value(t, p.reg, "lockproxy_lock_waiters", "") == n
				})
			}
			queue(b, 1)
			queue(c, 2)
			// Both waiters show the holder and their places, 1 and 2, as
			// they are now (the second never asked the lock service).
			testbed.Eventually(t, 5*time.Second, "the waiters' holder and places", func() bool {
				var holder string
				places := map[int]bool{}
				for _, l := range p.srv.Locks() {
					if l.State == "held" {
						holder = l.Owner
					}
				}
				for _, l := range p.srv.Locks() {
					if l.State == "waiting" && l.Holder == holder && holder != "" {
						places[l.Position] = true
					}
				}
				return places[1] && places[2]
			})
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := <-waited; err != nil {
					t.Fatalf("a waiter: %v", err)
				}
			}
			waitReleased(t, p)
			wantValues(t, p.reg, "lockproxy_lock_handoff_seconds", map[string]float64{"rule=sku-stock": 2})
			wantValues(t, p.reg, "lockproxy_lock_waiters_per_key", map[string]float64{"rule=sku-stock": 2})
			h := families(t, p.reg)["lockproxy_lock_waiters_per_key"].GetMetric()[0].GetHistogram()
			if got := h.GetSampleSum(); got != 3 {
				t.Errorf("waiters per key: sum of observations = %v, want 1 + 2", got)
			}
			hot := values(t, p.reg, "lockproxy_lock_hot_key_wait_seconds")
			if len(hot) != 1 {
				t.Fatalf("hot keys: %v, want the one row waited for", hot)
			}
			for labels, secs := range hot {
				if !strings.HasPrefix(labels, "key="+db+".sku/1,") || !strings.HasSuffix(labels, "rule=sku-stock") || secs <= 0 {
					t.Errorf("hot key %s = %v", labels, secs)
				}
			}
			lint(t, p.reg)
		})
	}
}

// redisLockKey finds the one lock hash under prefix (its queue, fence and
// channel names carry a suffix after the hash tag).
func redisLockKey(t *testing.T, rdb *redis.Client, prefix string) string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var locks []string
	for _, k := range keys {
		if strings.HasSuffix(k, "}") {
			locks = append(locks, k)
		}
	}
	if len(locks) != 1 {
		t.Fatalf("want one lock key under %s, found %v", prefix, keys)
	}
	return locks[0]
}

func deleteRedisKeys(rdb *redis.Client, pattern string) {
	ctx := context.Background()
	if keys, err := rdb.Keys(ctx, pattern).Result(); err == nil && len(keys) > 0 {
		_ = rdb.Del(ctx, keys...).Err()
	}
}

// TestQueryRouteMetrics checks lockproxy_queries_total counts each
// statement once, under the backend it went to and how it was sent.
func TestQueryRouteMetrics(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	waitReplica(t, p)
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	// Each read reports where it ran, so a replica the router sets aside
	// for a moment (lag on a busy machine) changes the expectation, not
	// the outcome.
	want := map[string]float64{}
	route := map[int]string{primaryID: "primary", replicaID: "replica"}
	read := func(kind, q string, args ...any) {
		t.Helper()
		want["kind="+kind+",route="+route[serverID(t, h, q, args...)]]++
	}
	before := values(t, p.reg, "lockproxy_queries_total")
	for range 3 {
		read("query", "SELECT @@server_id FROM t WHERE id = 1")
	}
	for range 2 {
		read("execute", "SELECT @@server_id FROM t WHERE id = ?", 1)
	}
	read("query", "SELECT @@server_id FROM t WHERE id = 1 FOR UPDATE")
	testbed.MustExec(t, h, "UPDATE t SET v = v + 1 WHERE id = 1", "UPDATE t SET v = v + 1 WHERE id = 1") // text writes
	if _, err := h.Exec("UPDATE t SET v = ? WHERE id = 1", 7); err != nil {                              // prepared write
		t.Fatal(err)
	}
	want["kind=query,route=primary"] += 2
	want["kind=execute,route=primary"]++
	got := values(t, p.reg, "lockproxy_queries_total")
	for k := range got {
		got[k] -= before[k]
		if got[k] == 0 {
			delete(got, k)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("lockproxy_queries_total increments:\n got  %v\n want %v", got, want)
	}
	if want["kind=query,route=replica"]+want["kind=execute,route=replica"] == 0 {
		t.Errorf("no read went to the healthy replica: %v", want)
	}
	if want["kind=query,route=primary"] < 3 {
		t.Errorf("the locking read did not go to the primary: %v", want)
	}
	for _, name := range []string{"lockproxy_replica_healthy", "lockproxy_replica_lag_seconds"} {
		if s := values(t, p.reg, name); len(s) != 1 {
			t.Errorf("%s: want one series for the replica, got %v", name, s)
		}
	}
	testbed.Eventually(t, 10*time.Second, "lockproxy_replica_healthy is 1 for the caught-up replica", func() bool {
		return value(t, p.reg, "lockproxy_replica_healthy", "backend="+p.bed.ReplicaAddr) == 1
	})
}

// TestRewriteMetrics checks each outcome of a rewrite rule is counted,
// and shows as 0 from the start: applied, skipped (several rows),
// conflicted (the row changed) and unpaired (no value read).
func TestRewriteMetrics(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 10), (2, 10)")
	p := startProxy(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "stock-cas", Table: db + ".sku", Key: []string{"sku_id"}, Lock: []string{},
			Rewrite: &rules.Rewrite{Column: "stock", Mode: "cas", Scope: rules.ScopeSession, OnConflict: rules.OnConflictZeroRows}}}
	})
	wantValues(t, p.reg, "lockproxy_rewrites_total", map[string]float64{
		"mode=cas,result=applied,rule=stock-cas":    0,
		"mode=cas,result=conflicted,rule=stock-cas": 0,
		"mode=cas,result=skipped,rule=stock-cas":    0,
		"mode=cas,result=unpaired,rule=stock-cas":   0,
	})
	conn, err := p.db(t, db, "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	update := func(q string) int64 {
		t.Helper()
		res, err := conn.ExecContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		n, _ := res.RowsAffected()
		return n
	}
	read := func() {
		t.Helper()
		var stock int
		if err := conn.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
			t.Fatal(err)
		}
	}
	read() // 10
	if n := update("UPDATE sku SET stock = 9 WHERE sku_id = 1"); n != 1 {
		t.Fatalf("applied rewrite changed %d rows", n)
	}
	read()                                                                   // 9
	testbed.MustExec(t, direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1") // a concurrent writer wins
	if n := update("UPDATE sku SET stock = 8 WHERE sku_id = 1"); n != 0 {
		t.Fatalf("conflicting rewrite changed %d rows", n)
	}
	update("UPDATE sku SET stock = 3 WHERE sku_id IN (1, 2)")
	if n := update("UPDATE sku SET stock = 2 WHERE sku_id = 2"); n != 1 { // nothing read: runs as sent
		t.Fatalf("unpaired write changed %d rows", n)
	}
	wantValues(t, p.reg, "lockproxy_rewrites_total", map[string]float64{
		"mode=cas,result=applied,rule=stock-cas":    1,
		"mode=cas,result=conflicted,rule=stock-cas": 1,
		"mode=cas,result=skipped,rule=stock-cas":    1,
		"mode=cas,result=unpaired,rule=stock-cas":   1,
	})
	lint(t, p.reg)
}
