package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// rewriteRule guards sku_stock.stock by rewriting, without any lock, for
// code that holds one connection per request (scope: session) and checks
// affected rows (on_conflict: zero_rows).
func rewriteRule(db, mode string) string {
	return fmt.Sprintf(`rules:
  - name: sku-stock
    table: %s.sku_stock
    key: [sku_id]
    lock: []
    rewrite:
      column: stock
      mode: %s
      min: 0
      scope: session
      on_conflict: zero_rows
`, db, mode)
}

// buyAutocommit is the unsafe application code without a transaction:
// read the stock, write back what was read minus one, and record an order
// when the UPDATE changed the row. Like a request handler, it does its
// read and its write on one connection (lockproxy remembers what a
// session read; a write on another connection is not rewritten).
func buyAutocommit(ctx context.Context, pool *sql.DB, buyer string, prepared bool) (bought, soldOut bool, err error) {
	db, err := pool.Conn(ctx)
	if err != nil {
		return false, false, err
	}
	defer db.Close()
	var stock int
	if prepared {
		err = db.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ?", 1).Scan(&stock)
	} else {
		err = db.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock)
	}
	if err != nil || stock <= 0 {
		return false, err == nil, err
	}
	var res sql.Result
	if prepared {
		res, err = db.ExecContext(ctx, "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", stock-1, 1)
	} else {
		res, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE sku_stock SET stock = %d WHERE sku_id = 1", stock-1))
	}
	if err != nil {
		return false, false, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, false, nil // a concurrent buyer won (cas) or the guard held
	}
	if prepared {
		_, err = db.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (?, ?)", 1, buyer)
	} else {
		_, err = db.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (1, '"+buyer+"')")
	}
	return err == nil, false, err
}

func runAutocommitSale(t *testing.T, direct *sql.DB, handles []*sql.DB, buyers, stock int, prepared bool) saleResult {
	t.Helper()
	for _, s := range []string{"DELETE FROM orders", "DELETE FROM sku_stock",
		fmt.Sprintf("INSERT INTO sku_stock (sku_id, stock) VALUES (1, %d)", stock)} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	res := saleResult{initial: stock, errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for attempt := 0; attempt < 1000; attempt++ {
				bought, soldOut, err := buyAutocommit(context.Background(), handles[i%len(handles)], fmt.Sprintf("buyer-%d", i), prepared)
				if err != nil {
					mu.Lock()
					res.errors[err.Error()]++
					mu.Unlock()
					return
				}
				if bought || soldOut {
					return
				}
				mu.Lock()
				res.retries++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if err := direct.QueryRow("SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&res.final); err != nil {
		t.Fatal(err)
	}
	if err := direct.QueryRow("SELECT COUNT(*) FROM orders").Scan(&res.orders); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRewriteTwoProxies(t *testing.T) {
	bed := testbed.Get(t)
	const dbName, buyers, stock = "e2e_rewrite", 400, 100
	direct := freshDB(t, bed, dbName)
	for _, s := range []string{saleSchema, ordersSchema} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"delta", "cas"} {
		t.Run(mode, func(t *testing.T) {
			locks := "locks:\n  backend: memory\n"
			a := start(t, bed, locks, rewriteRule(dbName, mode))
			b := start(t, bed, locks, rewriteRule(dbName, mode))
			for _, form := range []struct {
				name     string
				prepared bool
			}{{"text", false}, {"prepared", true}} {
				t.Run(form.name, func(t *testing.T) {
					via := []*sql.DB{open(t, bed, a.addr, dbName, "", 100), open(t, bed, b.addr, dbName, "", 100)}
					res := runAutocommitSale(t, direct, via, buyers, stock, form.prepared)
					t.Logf("through two lockproxy instances (%s): %v", mode, res)
					raw := runAutocommitSale(t, direct, []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, "", 200)}, buyers, stock, form.prepared)
					t.Logf("directly against MariaDB:              %v", raw)
					if res.oversold() != 0 || res.lost() != 0 || res.final != 0 || res.orders != stock || len(res.errors) != 0 {
						t.Errorf("through lockproxy (%s) the sale went wrong: %v", mode, res)
					}
				})
			}
		})
	}
}
