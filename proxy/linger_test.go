package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// lingerBed is two lockproxy instances sharing one Redis lock space, a
// rule guarding db.sku by sku_id with every lock kind, and
// locks.redis.linger as given (set after validation: tests may linger
// longer than MaxLinger so that a slow host cannot end it early); window
// is the Redis backend's local_handoff_window.
type lingerBed struct {
	db     string
	rdb    *redis.Client
	prefix string
	p      [2]*testProxy
	direct *sql.DB
}

func startLingerBed(t *testing.T, linger, window time.Duration) *lingerBed {
	t.Helper()
	return startLingerBedWith(t, linger, window, 0)
}

// startLingerBedWith is startLingerBed with the Redis backend's
// release_window.
func startLingerBedWith(t *testing.T, linger, window, releaseWindow time.Duration) *lingerBed {
	t.Helper()
	base := startProxy(t, nil)
	lb := &lingerBed{db: freshDB(t, base)}
	lb.direct = base.direct(t, lb.db, "")
	testbed.MustExec(t, lb.direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 100000), (2, 100000)")
	lb.rdb, lb.prefix = testRedis(t)
	all := []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn}
	for i := range lb.p {
		lb.p[i] = observedProxy(t, observed{log: zap.NewNop(),
			edit: func(c *rules.Config) {
				c.Locks.Backend = rules.LockBackendRedis
				c.Locks.Redis = &rules.RedisConfig{Addrs: []string{testbed.Get(t).RedisAddr}, Linger: rules.Duration(linger)}
				c.Rules = []rules.Rule{{Name: "sku", Table: lb.db + ".sku", Key: []string{"sku_id"}, Lock: all,
					OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(10 * time.Second)}}
			},
			locker: func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
				return redislock.New(lb.rdb, &redislock.Options{TTL: 10 * time.Second, Prefix: lb.prefix, Logger: log, Metrics: m,
					LocalHandoffs: rules.DefaultLocalHandoffs, LocalHandoffWindow: window, ReleaseWindow: releaseWindow})
			}})
	}
	return lb
}

// lockKey is the Redis key holding sku_id id's row lock.
func (lb *lingerBed) lockKey(id int) string {
	return fmt.Sprintf("%s:{%s.sku/%d}", lb.prefix, lb.db, id)
}

// rowKey is the lock key of row id, as the lock lists show it.
func (lb *lingerBed) rowKey(id int) string { return fmt.Sprintf("%s.sku/%d", lb.db, id) }

func (lb *lingerBed) stock(t *testing.T, id int) int {
	t.Helper()
	var n int
	if err := lb.direct.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLingerHandsOverToNextStatement: with locks.redis.linger, the row
// lock an autocommit UPDATE gave back stays with the instance, and the
// next UPDATE of the row, from another connection of that instance, takes
// it over without Redis (a local hand-off); without linger every UPDATE
// goes to Redis. Another instance's UPDATE of the row has the lingering
// lock released when it asks (its queued request tells the instance): it
// does not wait out the linger.
func TestLingerHandsOverToNextStatement(t *testing.T) {
	for _, linger := range []time.Duration{0, 4 * time.Second} {
		t.Run(fmt.Sprint(linger), func(t *testing.T) {
			lb := startLingerBed(t, linger, 0)
			a := lb.p[0].db(t, lb.db, "")
			a.SetMaxIdleConns(4)
			ctx := context.Background()
			c1, c2 := testbed.Conn(t, a), testbed.Conn(t, a)
			for _, c := range []*sql.Conn{c1, c2, c1, c2} {
				if _, err := c.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
					t.Fatal(err)
				}
			}
			handoffs := counterValue(t, lb.p[0], "lockproxy_lock_local_handoffs_total")
			// Every UPDATE's lock request was granted, by Redis or by
			// taking a lingering lock over.
			if got := counterValue(t, lb.p[0], "lockproxy_lock_acquire_total"); got != 4 {
				t.Errorf("lockproxy_lock_acquire_total %v after four UPDATEs, want 4", got)
			}
			if linger == 0 && handoffs != 0 {
				t.Errorf("without linger: %v local hand-offs, want 0 (every UPDATE asks Redis)", handoffs)
			}
			if linger > 0 {
				if handoffs != 2 {
					t.Errorf("with linger %v: %v local hand-offs, want 2 (the third and fourth UPDATE take the lingering lock; the first is the row's first, so its lock goes back to Redis)", linger, handoffs)
				}
				if n, err := lb.rdb.Exists(ctx, lb.lockKey(1)).Result(); err != nil || n != 1 {
					t.Errorf("while the lock lingers its Redis key %s exists: %d, %v", lb.lockKey(1), n, err)
				}
			}
			// The other instance: the lingering lock is released for it.
			other := lb.p[1].db(t, lb.db, "")
			if err := other.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := other.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); linger > 0 && took > linger/2 {
				t.Errorf("the other instance's UPDATE took %s; want the lingering lock released when it asked, not after the linger (%s)", took, linger)
			}
			if got := lb.stock(t, 1); got != 100000-5 {
				t.Errorf("stock %d, want %d", got, 100000-5)
			}
		})
	}
}

// TestLingerNoLostUpdates: clients on two instances with linger run the
// unsafe read-then-write transaction on two rows; every transaction's
// write counts (the lock passes between sessions of one instance through
// lingering, between instances through Redis).
func TestLingerNoLostUpdates(t *testing.T) {
	startLingerBed(t, 2*time.Millisecond, rules.DefaultLocalHandoffWindow).noLostUpdates(t)
}

// noLostUpdates has 8 clients, spread over both instances, run the unsafe
// read-then-write transaction 40 times each, alternating between two rows,
// and fails t unless every transaction's write counts.
func (lb *lingerBed) noLostUpdates(t *testing.T) {
	t.Helper()
	const clients, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		h := lb.p[i%2].db(t, lb.db, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if err := readThenWrite(h, 1+(i+j)%2); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := lb.stock(t, 1)+lb.stock(t, 2), 2*100000-clients*each; got != want {
		t.Errorf("stock of both rows %d, want %d: %d updates lost", got, want, got-want)
	}
}

func readThenWrite(h *sql.DB, id int) error {
	tx, err := h.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", id).Scan(&n); err != nil {
		return err
	}
	if _, err := tx.Exec("UPDATE sku SET stock = ? WHERE sku_id = ?", n-1, id); err != nil {
		return err
	}
	return tx.Commit()
}

// TestLingerReleasedAtShutdown: a lock lingering when lockproxy shuts
// down is given back to Redis before Shutdown returns, so no other
// instance waits for its lease to end.
func TestLingerReleasedAtShutdown(t *testing.T) {
	lb := startLingerBed(t, time.Hour, 0)
	ctx := context.Background()
	h := lb.p[0].db(t, lb.db, "")
	for range 2 { // the second time the row comes back: its lock lingers
		if _, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 2"); err != nil {
			t.Fatal(err)
		}
	}
	_ = h.Close()
	if n, err := lb.rdb.Exists(ctx, lb.lockKey(2)).Result(); err != nil || n != 1 {
		t.Fatalf("the lock lingers: its Redis key %s exists: %d, %v", lb.lockKey(2), n, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := lb.p[0].srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if n, err := lb.rdb.Exists(ctx, lb.lockKey(2)).Result(); err != nil || n != 0 {
		t.Errorf("after Shutdown the lingering lock's Redis key %s exists: %d, %v", lb.lockKey(2), n, err)
	}
}

// TestLingerNotWhileASessionWaits: a lock that a session of the instance
// waits for when its transaction ends is handed to that session at once,
// not kept lingering.
func TestLingerNotWhileASessionWaits(t *testing.T) {
	// A lock left lingering this long would outlast the waiting UPDATE's
	// wait_timeout (10s): it would fail with 1205.
	lb := startLingerBed(t, time.Hour, 0)
	h := lb.p[0].db(t, lb.db, "")
	tx, err := h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
		waited <- err
	}()
	// The second UPDATE waits in the instance for the row's lock.
	deadline := time.Now().Add(10 * time.Second)
	for values(t, lb.p[0].reg, "lockproxy_lock_waiters")[""] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second UPDATE never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("the UPDATE that waited for the committed transaction's lock: %v (the lock lingered instead of passing to it)", err)
	}
	if got := lb.stock(t, 1); got != 100000-2 {
		t.Errorf("stock %d, want %d", got, 100000-2)
	}
}

// TestLingerEachLockEndsWithItsTime: several locks linger at once under
// the instance's one timer, one of them taken over and parked again in
// between; each is given back to Redis when its own linger is over, the
// one parked last included.
func TestLingerEachLockEndsWithItsTime(t *testing.T) {
	// Long enough that the statements meant to come within it do so on a
	// busy host.
	const linger = time.Second
	lb := startLingerBed(t, linger, 0)
	ctx := context.Background()
	h := lb.p[0].db(t, lb.db, "")
	// Each row's first UPDATE gives its lock back to Redis; the second
	// leaves it lingering, the third takes it over and leaves it again.
	for _, id := range []int{1, 2, 1, 2, 1} {
		if _, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	if got := counterValue(t, lb.p[0], "lockproxy_lock_local_handoffs_total"); got != 1 {
		t.Errorf("%v local hand-offs, want 1 (the third UPDATE of row 1 takes its lingering lock)", got)
	}
	// Both keys are gone from Redis once their lingers are over; the
	// bound only keeps a lock that never ends from hanging the test.
	deadline := time.Now().Add(20 * linger)
	for _, id := range []int{1, 2} {
		for {
			n, err := lb.rdb.Exists(ctx, lb.lockKey(id)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("row %d's lock %s still held %v after its statement: its linger never ended", id, lb.lockKey(id), 20*linger)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := lb.p[0].srv.lockSvc.lingering.n.Load(); n != 0 {
		t.Errorf("%d locks still listed as lingering", n)
	}
}

// TestLingerOnlyKeysThatComeBack: a row lock lingers only when its key
// comes back within the linger: a row's first UPDATE gives its lock back
// to Redis, one that comes after the linger is over does too, and one
// that comes within it leaves its lock lingering.
func TestLingerOnlyKeysThatComeBack(t *testing.T) {
	// Long enough that the statements meant to come within it do so on a
	// busy host.
	const linger = time.Second
	lb := startLingerBed(t, linger, 0)
	ctx := context.Background()
	h := lb.p[0].db(t, lb.db, "")
	update := func() {
		t.Helper()
		if _, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
			t.Fatal(err)
		}
	}
	exists := func() bool {
		t.Helper()
		n, err := lb.rdb.Exists(ctx, lb.lockKey(1)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	// given back: the release runs in the background, so wait for it
	// (bounded: a lock left lingering would be gone after linger too,
	// and lingering shows in the instance's list at once).
	givenBack := func(what string) {
		t.Helper()
		if n := lb.p[0].srv.lockSvc.lingering.n.Load(); n != 0 {
			t.Fatalf("%s: %d locks lingering, want none", what, n)
		}
		testbed.Eventually(t, 10*time.Second, what+": the lock's Redis key is deleted", func() bool { return !exists() })
	}
	update()
	givenBack("after the row's first UPDATE")
	time.Sleep(2 * linger) // the next comes after the linger is over
	update()
	givenBack("after an UPDATE a linger after the last")
	update()
	if n := lb.p[0].srv.lockSvc.lingering.n.Load(); n != 1 || !exists() {
		t.Errorf("after an UPDATE right after the last: %d locks lingering, Redis key exists %v; want 1, true", n, exists())
	}
	// The lock lists show it as lingering, without a statement: no
	// session holds it.
	var shown []LockInfo
	for _, li := range lb.p[0].srv.Locks() {
		if li.Key == lb.rowKey(1) {
			shown = append(shown, li)
		}
	}
	if len(shown) != 1 || shown[0].State != "lingering" || shown[0].Statement != "" {
		t.Errorf("lock list for the row: %+v; want one entry, state lingering, no statement", shown)
	}
	for _, row := range lb.p[0].srv.showStatus().rows {
		if *row[0] == "lock_waiters" && *row[1] != "0" {
			t.Errorf("SHOW LOCKPROXY STATUS with a lock lingering: lock_waiters %s; want 0 (nobody waits)", *row[1])
		}
	}
}
