package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// poolConns is the size of the application's one connection pool, split
// evenly across the lockproxy instances it talks to.
const poolConns = 64

// saleBuyers is how many buyers a pooled sale runs: 150, or 400 with
// LOCKPROXY_SALE_LONG=1.
func saleBuyers() int {
	if long, _ := strconv.ParseBool(os.Getenv("LOCKPROXY_SALE_LONG")); long {
		return 400
	}
	return 150
}

// guardedRule is a sku_stock rule with the given lock classes and a
// rewrite of stock (min 0); extra adds rewrite keys (indented 6).
func guardedRule(db, lock, mode, extra string) string {
	return fmt.Sprintf(`rules:
  - name: sku-stock
    table: %s.sku_stock
    key: [sku_id]
    lock: %s
    on_unkeyed: reject
    rewrite:
      column: stock
      mode: %s
      min: 0
%s`, db, lock, mode, extra)
}

// pooledSale is a saleResult with the MySQL errors buyers got, by code
// (errors holds only the others).
type pooledSale struct {
	saleResult
	codes map[uint16]int
}

func (r pooledSale) String() string { return fmt.Sprintf("%v, error codes %v", r.saleResult, r.codes) }

// buyer is one attempt of some application code: bought, or saw the
// stock gone, or an error.
type buyer func(ctx context.Context, db *sql.DB, name string) (done bool, err error)

// runPooled resets the stock and runs buyers through the shared pools
// (buyer i uses handles[i%len]) until each is done. retry lists the codes
// a buyer retries; any other MySQL error ends that buyer (counted).
func runPooled(t *testing.T, direct *sql.DB, handles []*sql.DB, buyers, stock int, buy buyer, retry ...uint16) pooledSale {
	t.Helper()
	for _, s := range []string{"DELETE FROM orders", "DELETE FROM sku_stock",
		fmt.Sprintf("INSERT INTO sku_stock (sku_id, stock) VALUES (1, %d)", stock)} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	res := pooledSale{saleResult: saleResult{initial: stock, errors: map[string]int{}}, codes: map[uint16]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for attempt := 0; attempt < 2000; attempt++ {
				done, err := buy(context.Background(), handles[i%len(handles)], fmt.Sprintf("buyer-%d", i))
				var me *mysql.MySQLError
				mu.Lock()
				switch {
				case err == nil && done:
					mu.Unlock()
					return
				case err == nil:
					res.retries++
				case errors.As(err, &me):
					res.codes[me.Number]++
					if !contains(retry, me.Number) {
						mu.Unlock()
						return
					}
				default:
					res.errors[err.Error()]++
					mu.Unlock()
					return
				}
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

func contains(codes []uint16, c uint16) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// txnBuyer is buy (BEGIN; SELECT; UPDATE SET stock = read-1; INSERT;
// COMMIT, affected rows ignored) as a buyer.
func txnBuyer(prepared bool) buyer {
	return func(ctx context.Context, db *sql.DB, name string) (bool, error) {
		_, err := buy(ctx, db, name, prepared)
		return err == nil, err
	}
}

// autocommitBuyer is the same code without a transaction, each statement
// on whatever pooled connection database/sql hands out: read, write back
// read-1, record an order when the UPDATE changed the row.
func autocommitBuyer(prepared bool) buyer {
	return func(ctx context.Context, db *sql.DB, name string) (bool, error) {
		var stock int
		var err error
		if prepared {
			err = db.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ?", 1).Scan(&stock)
		} else {
			err = db.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock)
		}
		if err != nil || stock <= 0 {
			return err == nil, err
		}
		var res sql.Result
		if prepared {
			res, err = db.ExecContext(ctx, "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", stock-1, 1)
		} else {
			res, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE sku_stock SET stock = %d WHERE sku_id = 1", stock-1))
		}
		if err != nil {
			return false, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, nil
		}
		if prepared {
			_, err = db.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (?, ?)", 1, name)
		} else {
			_, err = db.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (1, '"+name+"')")
		}
		return err == nil, err
	}
}

// metricSum adds up the samples of a metric on the instances whose
// labels contain every one of want (`rule="sku-stock"`).
func metricSum(t *testing.T, name string, want []string, ins ...*instance) float64 {
	t.Helper()
	var sum float64
	for _, in := range ins {
		resp, err := http.Get("http://" + in.admin + "/metrics")
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
	lines:
		for _, line := range strings.Split(string(body), "\n") {
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			for _, w := range want {
				if !strings.Contains(line, w) {
					continue lines
				}
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

func saleTables(t *testing.T, bed *testbed.Bed, dbName string) *sql.DB {
	t.Helper()
	direct := freshDB(t, bed, dbName)
	for _, s := range []string{saleSchema, ordersSchema} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	return direct
}

var forms = []struct {
	name     string
	prepared bool
}{{"text", false}, {"prepared", true}}

// TestRewritePooledTransactions: transaction code that ignores affected
// rows, through one pool spread over two lockproxy instances, with an
// optimistic rule (rewrite, lock: []): nothing oversold, nothing lost,
// every lost race answered with the documented error (1213 for cas, 4025
// for delta), and no lock-service round trip.
func TestRewritePooledTransactions(t *testing.T) {
	bed := testbed.Get(t)
	const dbName, stock = "e2e_rewrite_pool", 100
	buyers := saleBuyers()
	direct := saleTables(t, bed, dbName)
	for _, mode := range []struct {
		name string
		lost uint16 // the error a lost race answers
	}{{"delta", 4025}, {"cas", 1213}} {
		t.Run(mode.name, func(t *testing.T) {
			locks := redisLocks(bed, "10s", "10s")
			a := start(t, bed, locks, guardedRule(dbName, "[]", mode.name, ""))
			b := start(t, bed, locks, guardedRule(dbName, "[]", mode.name, ""))
			for _, form := range forms {
				t.Run(form.name, func(t *testing.T) {
					via := []*sql.DB{
						open(t, bed, a.addr, dbName, "interpolateParams=false", poolConns/2),
						open(t, bed, b.addr, dbName, "interpolateParams=false", poolConns/2),
					}
					conflicted := []string{`rule="sku-stock"`, `result="conflicted"`}
					before := metricSum(t, "lockproxy_rewrites_total", conflicted, a, b)
					res := runPooled(t, direct, via, buyers, stock, txnBuyer(form.prepared), 1213)
					t.Logf("through two lockproxy instances (%s, %s): %v", mode.name, form.name, res)
					raw := runPooled(t, direct, []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, "interpolateParams=false", poolConns)},
						buyers, stock, txnBuyer(form.prepared), 1213)
					t.Logf("directly against MariaDB:                          %v", raw)

					if res.oversold() != 0 || res.lost() != 0 || res.final != 0 || res.orders != stock || len(res.errors) != 0 {
						t.Errorf("through lockproxy the sale went wrong: %v", res)
					}
					for code := range res.codes {
						if code != mode.lost {
							t.Errorf("buyers got error %d; a lost %s race answers only %d", code, mode.name, mode.lost)
						}
					}
					got := metricSum(t, "lockproxy_rewrites_total", conflicted, a, b) - before
					if lost := float64(res.codes[1213] + res.codes[4025]); got != lost {
						t.Errorf("lockproxy counted %v lost races, buyers were answered %v lost-race errors", got, lost)
					}
					if n := metricSum(t, "lockproxy_lock_acquire_total", []string{`rule="sku-stock"`}, a, b); n != 0 {
						t.Errorf("lock: [] took %v locks", n)
					}
				})
			}
		})
	}
}

// TestRewritePooledAutocommit: read-then-write without a transaction, each
// statement on whatever pooled connection comes, through the shipped rule
// (locks and delta rewrite). A write is never paired with another
// request's read: stock never rises above where it started, and lockproxy
// oversells no more than the same code run directly. With on_unpaired:
// reject no such write runs at all.
func TestRewritePooledAutocommit(t *testing.T) {
	bed := testbed.Get(t)
	const dbName, stock = "e2e_rewrite_autocommit", 100
	buyers := saleBuyers()
	direct := saleTables(t, bed, dbName)
	shipped := "[write, locking_read, read_in_txn]"
	locks := redisLocks(bed, "10s", "10s")
	t.Run("default", func(t *testing.T) {
		a := start(t, bed, locks, guardedRule(dbName, shipped, "delta", ""))
		b := start(t, bed, locks, guardedRule(dbName, shipped, "delta", ""))
		for _, form := range forms {
			t.Run(form.name, func(t *testing.T) {
				via := []*sql.DB{
					open(t, bed, a.addr, dbName, "interpolateParams=false", poolConns/2),
					open(t, bed, b.addr, dbName, "interpolateParams=false", poolConns/2),
				}
				res := runPooled(t, direct, via, buyers, stock, autocommitBuyer(form.prepared), 1205)
				t.Logf("through two lockproxy instances: %v", res)
				raw := runPooled(t, direct, []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, "interpolateParams=false", poolConns)},
					buyers, stock, autocommitBuyer(form.prepared), 1205)
				t.Logf("directly against MariaDB:        %v", raw)
				if res.final > stock || res.final < 0 || len(res.errors) != 0 {
					t.Errorf("through lockproxy the stock went wrong: %v", res)
				}
				for code := range res.codes {
					if code != 1205 {
						t.Errorf("buyers got error %d", code)
					}
				}
				if res.oversold() > raw.oversold() {
					t.Errorf("lockproxy oversold %d, the same code directly %d", res.oversold(), raw.oversold())
				}
				if n := metricSum(t, "lockproxy_rewrites_total", []string{`result="unpaired"`}, a, b); n == 0 {
					t.Errorf("no unpaired write counted")
				}
			})
		}
	})
	t.Run("on_unpaired reject", func(t *testing.T) {
		reject := "      on_unpaired: reject\n"
		a := start(t, bed, locks, guardedRule(dbName, shipped, "delta", reject))
		b := start(t, bed, locks, guardedRule(dbName, shipped, "delta", reject))
		via := []*sql.DB{
			open(t, bed, a.addr, dbName, "", poolConns/2),
			open(t, bed, b.addr, dbName, "", poolConns/2),
		}
		res := runPooled(t, direct, via, buyers, stock, autocommitBuyer(false), 1205)
		t.Logf("through two lockproxy instances: %v", res)
		if res.oversold() != 0 || res.lost() != 0 || res.final != stock || len(res.errors) != 0 {
			t.Errorf("through lockproxy the sale went wrong: %v", res)
		}
		if res.codes[1105] != buyers {
			t.Errorf("%d of %d buyers were refused with 1105", res.codes[1105], buyers)
		}
	})
}
