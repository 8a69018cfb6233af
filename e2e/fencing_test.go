package e2e

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestPausedHolderCannotWrite: a proxy paused past its lease while its
// session holds a key: another proxy takes the key and writes; the first,
// resumed, must not write — its client gets 1213 and the data shows only the
// second writer's change.
func TestPausedHolderCannotWrite(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_fencing"
	direct := freshDB(t, bed, dbName)
	for _, s := range []string{
		"CREATE TABLE sku_stock (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)",
		"INSERT INTO sku_stock (sku_id, stock) VALUES (1, 100)",
	} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	rule := saleRule(dbName) + "    fence: fence\n"
	const ttl = 2 * time.Second
	locks := redisLocks(bed, ttl.String(), "15s")
	a := start(t, bed, locks, rule)
	b := start(t, bed, locks, rule)
	ctx := context.Background()
	ca := testbed.Conn(t, open(t, bed, a.addr, dbName, "", 2))
	cb := testbed.Conn(t, open(t, bed, b.addr, dbName, "", 2))

	execOn(t, ca, "BEGIN")
	var read int
	if err := ca.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&read); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// B gets the row once A's lease has run out, and writes. A's locked
	// read was a current read (LOCK IN SHARE MODE), so InnoDB holds B's
	// UPDATE until A's transaction ends: B writes once A, resumed, has
	// rolled back.
	bDone := make(chan error, 1)
	go func() {
		_, err := cb.ExecContext(ctx, "BEGIN")
		if err == nil {
			_, err = cb.ExecContext(ctx, "UPDATE sku_stock SET stock = 42 WHERE sku_id = 1")
		}
		if err == nil {
			_, err = cb.ExecContext(ctx, "COMMIT")
		}
		bDone <- err
	}()
	time.Sleep(ttl + 500*time.Millisecond) // A's lease runs out; B is granted the row

	// A's client writes what it computed from its read; A wakes up.
	done := make(chan error, 1)
	go func() {
		_, err := ca.ExecContext(ctx, fmt.Sprintf("UPDATE sku_stock SET stock = %d WHERE sku_id = 1", read-1))
		if err == nil {
			_, err = ca.ExecContext(ctx, "COMMIT")
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed proxy's client got no answer")
	}
	select {
	case berr := <-bDone:
		if berr != nil {
			t.Fatalf("the second writer: %v", berr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second writer got no answer after the paused holder rolled back")
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 {
		t.Fatalf("the paused holder's write: want 1213, got %v", err)
	}
	t.Logf("paused holder's client: %s", me.Message)
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	if stock != 42 {
		t.Fatalf("stock = %d: only the second writer's change (42) may be in the data", stock)
	}
}
