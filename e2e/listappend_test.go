package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/listappend"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// The list-append workload: each key holds a comma-separated list;
// transactions read one to three keys with plain SELECTs and append a
// unique element to some of them with an absolute UPDATE of the value
// read (no FOR UPDATE: the read_in_txn rule is what must make it safe).
// internal/listappend then checks the whole history: no append lost, no
// aborted append visible, every read a prefix of the final list, and no
// cycle among the committed transactions' dependencies.

const listKeys = 5

func listRule(db string) string {
	return fmt.Sprintf(`rules:
  - name: lists
    table: %s.lists
    key: [k]
    lock: [write, locking_read, read_in_txn]
    on_unkeyed: reject
`, db)
}

func listDB(t *testing.T, bed *testbed.Bed, name string) *sql.DB {
	t.Helper()
	direct := freshDB(t, bed, name)
	if _, err := direct.Exec("CREATE TABLE lists (k INT PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return direct
}

// listRun is what one run of the workload did.
type listRun struct {
	committed []listappend.Txn
	aborted   int64
	errors    map[string]int // unexpected errors, by message
}

// runLists empties the lists, runs the workload for d over the handles
// (workers spread over them) and checks the history against the final
// lists read directly from the primary.
func runLists(t *testing.T, direct *sql.DB, via []*sql.DB, workers int, d time.Duration, prepared bool) (listRun, []listappend.Anomaly) {
	t.Helper()
	if _, err := direct.Exec("DELETE FROM lists"); err != nil {
		t.Fatal(err)
	}
	for k := range listKeys {
		if _, err := direct.Exec("INSERT INTO lists VALUES (?, '')", k); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		run    = listRun{errors: map[string]int{}}
		nextID atomic.Int64
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				txn, err := appendTxn(via[w%len(via)], rng, &nextID, prepared)
				mu.Lock()
				switch {
				case err == nil:
					txn.ID = len(run.committed) + 1
					run.committed = append(run.committed, txn)
				case retryable(err):
					run.aborted++
				default:
					run.errors[err.Error()]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	final := map[int][]int64{}
	rows, err := direct.Query("SELECT k, v FROM lists")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k int
		var v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if final[k], err = parseList(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return run, listappend.Check(run.committed, final)
}

// appendTxn runs one transaction: one to three distinct keys in random
// order, each read, and appended to with probability one half. It returns
// the operations as done, which count only if the commit succeeded.
func appendTxn(db *sql.DB, rng *rand.Rand, nextID *atomic.Int64, prepared bool) (txn listappend.Txn, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := rng.Perm(listKeys)[:1+rng.IntN(3)]
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return txn, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, k := range keys {
		var v string
		if prepared {
			err = tx.QueryRowContext(ctx, "SELECT v FROM lists WHERE k = ?", k).Scan(&v)
		} else {
			err = tx.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM lists WHERE k = %d", k)).Scan(&v)
		}
		if err != nil {
			return txn, err
		}
		l, err := parseList(v)
		if err != nil {
			return txn, err
		}
		txn.Ops = append(txn.Ops, listappend.Op{Key: k, Read: l})
		if rng.IntN(2) == 0 {
			continue
		}
		e := nextID.Add(1)
		nv := strconv.FormatInt(e, 10)
		if v != "" {
			nv = v + "," + nv
		}
		if prepared {
			_, err = tx.ExecContext(ctx, "UPDATE lists SET v = ? WHERE k = ?", nv, k)
		} else {
			_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE lists SET v = '%s' WHERE k = %d", nv, k))
		}
		if err != nil {
			return txn, err
		}
		txn.Ops = append(txn.Ops, listappend.Op{Key: k, Append: e})
	}
	return txn, tx.Commit()
}

func parseList(v string) ([]int64, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	l := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", v, err)
		}
		l[i] = n
	}
	return l, nil
}

func (r listRun) appends() int {
	n := 0
	for _, t := range r.committed {
		for _, op := range t.Ops {
			if !op.IsRead() {
				n++
			}
		}
	}
	return n
}

// TestListAppendHistory: the list-append workload through two lockproxy
// instances on Redis, text and prepared, leaves a history with no
// anomaly; the same code directly against MariaDB is checked too and its
// anomalies are logged (a lost update shows as a lost append or a cycle).
func TestListAppendHistory(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_lists"
	direct := listDB(t, bed, dbName)
	locks := redisLocks(bed, "10s", "5s")
	a := start(t, bed, locks, listRule(dbName))
	b := start(t, bed, locks, listRule(dbName))
	const workers = 8
	for _, mode := range []struct {
		name     string
		prepared bool
	}{{"text", false}, {"prepared", true}} {
		t.Run(mode.name, func(t *testing.T) {
			params := "interpolateParams=false"
			via := []*sql.DB{open(t, bed, a.addr, dbName, params, workers), open(t, bed, b.addr, dbName, params, workers)}
			const d = 3 * time.Second
			run, anomalies := runLists(t, direct, via, workers, d, mode.prepared)
			t.Logf("through two lockproxy instances: %d transactions committed (%d appends), %d aborted and retried, %d anomalies",
				len(run.committed), run.appends(), run.aborted, len(anomalies))
			onPrimary := []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, params, workers)}
			raw, rawAnomalies := runLists(t, direct, onPrimary, workers, d, mode.prepared)
			t.Logf("directly against MariaDB: %d transactions committed, %d anomalies, first: %v",
				len(raw.committed), len(rawAnomalies), rawAnomalies[:min(len(rawAnomalies), 3)])

			for _, x := range anomalies[:min(len(anomalies), 10)] {
				t.Errorf("through lockproxy: %v", x)
			}
			if run.appends() == 0 {
				t.Errorf("no append committed through lockproxy")
			}
			for msg, n := range run.errors {
				t.Errorf("through lockproxy: %dx unexpected error: %s", n, msg)
			}
		})
	}
}
