package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

func TestFencing(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)",
		"INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 10)")
	p := guardedProxy(t, db, func(r *rules.Rule) { r.Fence = "fence" })
	ctx := context.Background()
	h := p.db(t, db, "")
	stock := func(id int) (n int, fence uint64) {
		t.Helper()
		if err := direct.QueryRow("SELECT stock, fence FROM sku WHERE sku_id = ?", id).Scan(&n, &fence); err != nil {
			t.Fatal(err)
		}
		return n, fence
	}

	t.Run("a locked update stamps the token", func(t *testing.T) {
		for _, prepared := range []bool{false, true} {
			var err error
			if prepared {
				_, err = h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = ?", 1)
			} else {
				_, err = h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if n, fence := stock(1); n != 8 || fence == 0 {
			t.Fatalf("stock %d fence %d: want 8 and a token", n, fence)
		}
	})
	t.Run("no such row is not a stale lock", func(t *testing.T) {
		res, err := h.Exec("UPDATE sku SET stock = 0 WHERE sku_id = 999")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 0 {
			t.Fatalf("affected %d", n)
		}
	})
	t.Run("a newer token in the row refuses the write and rolls back", func(t *testing.T) {
		// Another holder, granted the lock after this session's lease, wrote
		// the row with its larger token.
		testbed.MustExec(t, direct, "UPDATE sku SET fence = 18446744073709551615 WHERE sku_id = 1")
		c, err := h.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mustConnExec(t, c, "BEGIN", "UPDATE sku SET stock = stock - 1 WHERE sku_id = 2")
		_, err = c.ExecContext(ctx, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
		me := mysqlErr(t, err)
		if me.Number != 1213 || !strings.Contains(me.Message, "fencing token") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("want 1213 for a stale token, got %v", me)
		}
		if n, _ := stock(1); n != 8 {
			t.Errorf("stale write changed row 1: stock %d", n)
		}
		if n, _ := stock(2); n != 10 {
			t.Errorf("the stale transaction's earlier write survived: stock %d", n)
		}
		if got := counterValue(t, p, "lockproxy_fenced_writes_total"); got != 1 {
			t.Errorf("lockproxy_fenced_writes_total = %v", got)
		}
	})
}

// counterValue sums a counter family's samples from the proxy's registry.
func counterValue(t *testing.T, p *testProxy, name string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
