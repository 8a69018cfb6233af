package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestReleaseWindowStatements: with locks.redis.release_window, an
// autocommit UPDATE's row lock is given back to Redis later (it is still
// there after the answer), yet neither the same session's next UPDATE of
// the row nor another session of the instance waits for the window; an
// UPDATE through another instance has the release sent when it asks,
// not after the window; the lock list shows a held release as
// releasing; and clients on both instances lose no update.
func TestReleaseWindowStatements(t *testing.T) {
	const window = 3 * time.Second
	lb := startLingerBedWith(t, 0, 0, window)
	a := lb.p[0].db(t, lb.db, "")
	a.SetMaxIdleConns(4)
	ctx := context.Background()
	c1, c2 := testbed.Conn(t, a), testbed.Conn(t, a)
	run := func(what string, exec func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := exec(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return time.Since(start)
	}
	const q = "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"
	run("first UPDATE", func() error { _, err := c1.ExecContext(ctx, q); return err })
	if n, err := lb.rdb.Exists(ctx, lb.lockKey(1)).Result(); err != nil || n != 1 {
		t.Fatalf("right after the UPDATE its lock's Redis key %s exists: %d, %v; want 1 (the release held)", lb.lockKey(1), n, err)
	}
	var shown []LockInfo
	for _, li := range lb.p[0].srv.Locks() {
		if li.Key == lb.rowKey(1) {
			shown = append(shown, li)
		}
	}
	if len(shown) != 1 || shown[0].State != "releasing" || shown[0].Statement != "" || shown[0].Rule != "sku" {
		t.Errorf("lock list for the row while its release is held: %+v; want one entry of rule sku, state releasing, no statement", shown)
	}
	status := map[string]string{}
	for _, row := range lb.p[0].srv.showStatus().rows {
		if row[0] != nil && row[1] != nil {
			status[*row[0]] = *row[1]
		}
	}
	if status["lock_waiters"] != "0" || status["locks_held"] != "1" {
		t.Errorf("SHOW LOCKPROXY STATUS while the release is held: locks_held %q, lock_waiters %q; want 1 and 0 (the row is still taken, nobody waits)",
			status["locks_held"], status["lock_waiters"])
	}
	if took := run("the session's next UPDATE", func() error { _, err := c1.ExecContext(ctx, q); return err }); took > window/2 {
		t.Errorf("the same session's next UPDATE of the row took %s; want it not to wait for the window (%s)", took, window)
	}
	if took := run("another session's UPDATE", func() error { _, err := c2.ExecContext(ctx, q); return err }); took > window/2 {
		t.Errorf("another session of the instance took %s for the row; want it not to wait for the window (%s)", took, window)
	}
	if took := run("the other instance's UPDATE", func() error {
		_, err := lb.p[1].db(t, lb.db, "").Exec(q)
		return err
	}); took > window/2 {
		t.Errorf("the other instance's UPDATE took %s; want the held release sent when it asked, not after the window (%s)", took, window)
	}
	if got := lb.stock(t, 1); got != 100000-4 {
		t.Errorf("stock %d, want %d", got, 100000-4)
	}
}

// TestReleaseWindowNoLostUpdates: clients on two instances with a short
// release_window run the unsafe read-then-write transaction on two rows;
// every transaction's write counts.
func TestReleaseWindowNoLostUpdates(t *testing.T) {
	startLingerBedWith(t, 0, 0, time.Millisecond).noLostUpdates(t)
}
