package workload

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// StockWatch tracks the lowest stock seen on the primary during the run.
// Safe for concurrent use.
type StockWatch struct {
	mu  sync.Mutex
	min int64
}

// NewStockWatch returns a watch that has seen only InitialStock.
func NewStockWatch() *StockWatch { return &StockWatch{min: InitialStock} }

// Run reads MIN(stock) through db every interval until ctx ends.
func (w *StockWatch) Run(ctx context.Context, db *sql.DB, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var m int64
		if err := db.QueryRowContext(ctx, "SELECT MIN(stock) FROM sku_stock").Scan(&m); err == nil {
			w.mu.Lock()
			w.min = min(w.min, m)
			w.mu.Unlock()
		}
	}
}

// Lowest is the lowest stock seen so far.
func (w *StockWatch) Lowest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min
}

// State is what the tables hold at the end, read on the primary.
type State struct {
	Stock      map[int64]int64 // by hot sku
	Orders     map[int64]int64
	Restocked  map[int64]int64
	MinStock   int64
	Abandoned  int64 // AbandonSKU's stock
	CounterSum int64
}

// ReadState reads the tables' State through db, a pool on the primary.
func ReadState(ctx context.Context, db *sql.DB) (State, error) {
	st := State{Stock: map[int64]int64{}, Orders: map[int64]int64{}, Restocked: map[int64]int64{}}
	queries := []struct {
		q  string
		to map[int64]int64
	}{
		{fmt.Sprintf("SELECT sku_id, stock FROM sku_stock WHERE sku_id <= %d", HotSKUs), st.Stock},
		{"SELECT sku_id, COUNT(*) FROM orders GROUP BY sku_id", st.Orders},
		{"SELECT sku_id, SUM(qty) FROM restocks GROUP BY sku_id", st.Restocked},
	}
	for _, x := range queries {
		if err := readPairs(ctx, db, x.q, x.to); err != nil {
			return st, err
		}
	}
	err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT MIN(stock), (SELECT stock FROM sku_stock WHERE sku_id = %d), (SELECT COALESCE(SUM(n),0) FROM counters) FROM sku_stock", AbandonSKU)).
		Scan(&st.MinStock, &st.Abandoned, &st.CounterSum)
	if err != nil {
		return st, fmt.Errorf("soak: read state: %w", err)
	}
	return st, nil
}

// readPairs runs q, whose rows are (key, value) pairs, into to.
func readPairs(ctx context.Context, db *sql.DB, q string, to map[int64]int64) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("soak: %s: %w", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v int64
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("soak: %s: %w", q, err)
		}
		to[k] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("soak: %s: %w", q, err)
	}
	return nil
}
