package e2e

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestDrainOnSIGTERM: SIGTERM stops accepting, ends idle sessions, lets an
// open transaction commit within the grace period, then exits.
func TestDrainOnSIGTERM(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_drain"
	keyedTable(t, bed, dbName)
	in := start(t, bed, "locks:\n  backend: memory\n", saleRule(dbName))
	busy := testbed.Conn(t, open(t, bed, in.addr, dbName, "", 2))
	idle := testbed.Conn(t, open(t, bed, in.addr, dbName, "", 2))
	ctx := context.Background()
	execOn(t, busy, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")

	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, "the listener closes", func() bool {
		c, err := net.DialTimeout("tcp", in.addr, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	if _, err := idle.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Error("an idle session outside a transaction still runs statements while draining")
	}
	// The open transaction finishes.
	execOn(t, busy, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1", "COMMIT")
	done := make(chan error, 1)
	go func() { done <- in.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lockproxy exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lockproxy did not exit after its last transaction ended")
	}
	var stock int
	if err := open(t, bed, bed.PrimaryAddr, dbName, "", 1).QueryRow("SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	if stock != 8 {
		t.Fatalf("stock %d: the transaction open at SIGTERM did not commit both updates", stock)
	}
}
