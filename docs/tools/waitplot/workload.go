package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// setup creates the sku table directly on the primary, one row per key.
func setup(ctx context.Context, dsn string, keys int) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)"); err != nil {
		return err
	}
	vals := make([]string, 0, keys)
	for k := 1; k <= keys; k++ {
		vals = append(vals, fmt.Sprintf("(%d, 1000000)", k))
	}
	_, err = db.ExecContext(ctx, "REPLACE INTO sku VALUES "+strings.Join(vals, ","))
	return err
}

// workload is the running set of sessions.
type workload struct {
	cancel                  context.CancelFunc
	wg                      sync.WaitGroup
	done, timeouts, victims atomic.Int64
	errs                    sync.Map // message -> *atomic.Int64
}

// startWorkload runs o.workers sessions doing the unsafe read-then-write
// lockproxy guards: BEGIN; SELECT stock; (work); UPDATE; COMMIT. In the
// middle phase most transactions go for row 1.
func startWorkload(ctx context.Context, db *sql.DB, o options, start time.Time) *workload {
	ctx, cancel := context.WithCancel(ctx)
	w := &workload{cancel: cancel}
	for i := 0; i < o.workers; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				key := 1 + rand.IntN(o.keys)
				if since := time.Since(start); since > o.phase && since < 2*o.phase && rand.IntN(10) < 8 {
					key = 1
				}
				w.count(buy(ctx, db, key, o.hold))
			}
		}()
	}
	return w
}

func (w *workload) count(err error) {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		w.done.Add(1)
	case errors.As(err, &me) && me.Number == 1205:
		w.timeouts.Add(1)
	case errors.As(err, &me) && me.Number == 1213:
		w.victims.Add(1)
	case errors.Is(err, context.Canceled):
	default:
		n, _ := w.errs.LoadOrStore(err.Error(), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
}

// stop ends the sessions and says what they did.
func (w *workload) stop() string {
	w.cancel()
	w.wg.Wait()
	s := fmt.Sprintf("%d transactions, %d lock wait timeouts (1205), %d deadlock victims (1213)",
		w.done.Load(), w.timeouts.Load(), w.victims.Load())
	w.errs.Range(func(k, v any) bool {
		s += fmt.Sprintf("; %d× %v", v.(*atomic.Int64).Load(), k)
		return true
	})
	return s
}

// buy is one read-then-write transaction on row key.
func buy(ctx context.Context, db *sql.DB, key int, hold time.Duration) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var stock int
	if err := tx.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = ?", key).Scan(&stock); err != nil {
		return err
	}
	time.Sleep(hold)
	if _, err := tx.ExecContext(ctx, "UPDATE sku SET stock = ? WHERE sku_id = ?", stock-1, key); err != nil {
		return err
	}
	return tx.Commit()
}
