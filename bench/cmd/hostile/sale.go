package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The flash sale: buyers read the stock in a transaction and write back
// what they read minus one, the unsafe read-then-write lockproxy's row
// lock makes safe; whoever finds it sold out restocks. At the end the
// books must balance: initial + restocked - sold = stock, and stock >= 0.
const (
	initialStock = 50
	restockBy    = 50
	buyers       = 32
)

// saleResult is what the sale did and what the database holds after it.
type saleResult struct {
	sold, restocked, errors atomic.Int64
	lastErr                 atomic.Value // string
	stock, orders, restock  int64
}

// flashSale runs buyers until ctx ends.
func flashSale(ctx context.Context, t *target, r *saleResult) {
	db, err := sql.Open("mysql", t.bed.DSN(t.addr, saleDB)+"&timeout=5s")
	if err != nil {
		r.fail(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(buyers)
	db.SetMaxIdleConns(buyers)
	var wg sync.WaitGroup
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if err := buy(db, fmt.Sprintf("buyer-%d-%d", i, n), r); err != nil {
					r.fail(err)
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(i)
	}
	wg.Wait()
}

func (r *saleResult) fail(err error) {
	r.errors.Add(1)
	r.lastErr.Store(err.Error())
}

// buy is one purchase (or restock) in a transaction.
func buy(db *sql.DB, buyer string, r *saleResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var stock int64
	if err := tx.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		return err
	}
	if stock <= 0 {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE sku SET stock = %d WHERE sku_id = 1", stock+restockBy)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO restocks (amount) VALUES (%d)", restockBy)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		r.restocked.Add(1)
		return nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE sku SET stock = %d WHERE sku_id = 1", stock-1)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (sku_id, buyer) VALUES (1, '"+buyer+"')"); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.sold.Add(1)
	return nil
}

// settle reads the books straight from the primary.
func settle(t *target, r *saleResult) error {
	db, err := sql.Open("mysql", t.bed.DSN(t.bed.Primary, saleDB))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&r.stock); err != nil {
		return err
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&r.orders); err != nil {
		return err
	}
	return db.QueryRow("SELECT COALESCE(SUM(amount), 0) FROM restocks").Scan(&r.restock)
}

// oversold and lost derive the sale's failures from the books: a lost
// update leaves more stock than the orders allow; an oversold item less.
func (r *saleResult) oversold() int64 {
	if r.stock < 0 {
		return -r.stock
	}
	return max(0, (r.stock+r.orders)-(initialStock+r.restock))
}

func (r *saleResult) lost() int64 {
	return max(0, r.stock-(initialStock+r.restock-r.orders))
}

// probeResult is the legitimate logins, one a second.
type probeResult struct {
	tries, failures int64
	worst           time.Duration
	lastErr         string
}

// probeLogins logs in as the real user from 127.0.0.1 every second, runs
// SELECT 1 and logs out.
func probeLogins(ctx context.Context, t *target, r *probeResult) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		err := loginOnce(t)
		r.tries++
		if d := time.Since(start); d > r.worst {
			r.worst = d
		}
		if err != nil {
			r.failures++
			r.lastErr = err.Error()
		}
	}
}

func loginOnce(t *target) error {
	db, err := sql.Open("mysql", t.bed.DSN(t.addr, "")+"&timeout=5s&readTimeout=5s")
	if err != nil {
		return err
	}
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return errors.New("SELECT 1 returned something else")
	}
	return nil
}

// privacyResult counts SHOW LOCKPROXY LOCKS answers to a user without
// PROCESS that showed a buyer's name.
type privacyResult struct {
	looks, rows, leaks int64
	sample             string
}

// watchLocks reads SHOW LOCKPROXY LOCKS as the user without PROCESS.
func watchLocks(ctx context.Context, t *target, r *privacyResult) {
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s", plainUser, plainPass, t.addr, saleDB))
	if err != nil {
		return
	}
	defer db.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := db.Query("SHOW LOCKPROXY LOCKS")
		if err != nil {
			continue
		}
		r.looks++
		cols, _ := rows.Columns()
		for rows.Next() {
			v := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(v))
			for i := range v {
				ptrs[i] = &v[i]
			}
			if rows.Scan(ptrs...) != nil {
				break
			}
			r.rows++
			if stmt := v[7].String; strings.Contains(stmt, "buyer-") {
				r.leaks++
				r.sample = stmt
			}
		}
		_ = rows.Close()
	}
}
