package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// saleRule guards shop.sku_stock rows by sku_id, locking reads in
// transactions too, which is what makes read-then-write safe.
func saleRule(db string) string {
	return fmt.Sprintf(`rules:
  - name: sku-stock
    table: %s.sku_stock
    key: [sku_id]
    lock: [write, locking_read, read_in_txn]
    on_unkeyed: reject
`, db)
}

const saleSchema = `CREATE TABLE sku_stock (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)`
const ordersSchema = `CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku_id BIGINT NOT NULL, buyer VARCHAR(64) NOT NULL)`

// saleResult is what one flash sale did.
type saleResult struct {
	initial, final, orders int
	retries                int            // 1205/1213 answers the buyers retried
	errors                 map[string]int // anything else, by message
}

func (r saleResult) oversold() int {
	if r.orders > r.initial {
		return r.orders - r.initial
	}
	return 0
}

// lost counts updates that vanished: orders taken that the stock does not show.
func (r saleResult) lost() int { return r.orders - (r.initial - r.final) }

func (r saleResult) String() string {
	return fmt.Sprintf("stock %d -> %d, orders %d, oversold %d, lost updates %d, retried %d, other errors %v",
		r.initial, r.final, r.orders, r.oversold(), r.lost(), r.retries, r.errors)
}

// buy is the application code under test: the unsafe read-then-write, in
// a transaction, with no FOR UPDATE. prepared selects the server-side
// prepared form (placeholders) over literal text.
func buy(ctx context.Context, db *sql.DB, buyer string, prepared bool) (bought bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	return buyIn(ctx, tx, buyer, prepared)
}

// buyIn is buy after BEGIN: it commits tx or rolls it back.
func buyIn(ctx context.Context, tx *sql.Tx, buyer string, prepared bool) (bought bool, err error) {
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var stock int
	if prepared {
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ?", 1).Scan(&stock)
	} else {
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock)
	}
	if err != nil {
		return false, err
	}
	if stock <= 0 {
		return false, tx.Rollback()
	}
	if prepared {
		_, err = tx.ExecContext(ctx, "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", stock-1, 1)
	} else {
		_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE sku_stock SET stock = %d WHERE sku_id = 1", stock-1))
	}
	if err != nil {
		return false, err
	}
	if prepared {
		_, err = tx.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (?, ?)", 1, buyer)
	} else {
		_, err = tx.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (1, '"+buyer+"')")
	}
	if err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// retryable reports the errors a client is told to retry: lock wait
// timeout and deadlock (from lockproxy or from InnoDB).
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1205 || me.Number == 1213)
}

// runSale resets the stock and lets buyers buy through the handles (buyer i
// uses handles[i%len]) until each has bought once or seen the stock gone.
func runSale(t *testing.T, direct *sql.DB, handles []*sql.DB, buyers, stock int, prepared bool) saleResult {
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
	ctx := context.Background()
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for attempt := 0; attempt < 50; attempt++ {
				_, err := buy(ctx, handles[i%len(handles)], fmt.Sprintf("buyer-%d", i), prepared)
				mu.Lock()
				switch {
				case err == nil:
					mu.Unlock()
					return
				case retryable(err):
					res.retries++
					mu.Unlock()
					continue
				default:
					res.errors[err.Error()]++
					mu.Unlock()
					return
				}
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

func TestFlashSaleTwoProxies(t *testing.T) {
	bed := testbed.Get(t)
	for _, backend := range []struct{ name, locks string }{
		{"redis", redisLocks(bed, "10s", "10s")},
		{"mysql", "locks:\n  backend: mysql\n  mysql: {table: e2e_flashsale_locks.locks}\n  ttl: 10s\n  wait_timeout: 10s\n"},
	} {
		t.Run(backend.name, func(t *testing.T) { flashSale(t, bed, backend.locks, 400) })
	}
}

// flashSale runs the sale through two lockproxy instances on one lock
// backend, in text and prepared form, next to the same code run directly.
func flashSale(t *testing.T, bed *testbed.Bed, locks string, buyers int) {
	const dbName, stock = "e2e_flashsale", 100
	direct := freshDB(t, bed, dbName)
	for _, s := range []string{saleSchema, ordersSchema} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	a := start(t, bed, locks, saleRule(dbName))
	b := start(t, bed, locks, saleRule(dbName))
	for _, mode := range []struct {
		name     string
		prepared bool
	}{{"text", false}, {"prepared", true}} {
		t.Run(mode.name, func(t *testing.T) {
			params := "interpolateParams=false"
			viaProxy := []*sql.DB{
				open(t, bed, a.addr, dbName, params, buyers/2),
				open(t, bed, b.addr, dbName, params, buyers/2),
			}
			res := runSale(t, direct, viaProxy, buyers, stock, mode.prepared)
			t.Logf("through two lockproxy instances: %v", res)
			raw := runSale(t, direct, []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, params, buyers)}, buyers, stock, mode.prepared)
			t.Logf("directly against MariaDB:        %v", raw)

			if res.oversold() != 0 || res.lost() != 0 || res.final != 0 || res.orders != stock {
				t.Errorf("through lockproxy the sale went wrong: %v", res)
			}
			if len(res.errors) != 0 {
				t.Errorf("buyers saw errors other than 1205/1213: %v", sortedKeys(res.errors))
			}
			if raw.lost() == 0 && raw.oversold() == 0 {
				t.Logf("note: the direct run happened not to lose updates this time")
			}
		})
	}
}

func sortedKeys(m map[string]int) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%dx %s", v, k))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
