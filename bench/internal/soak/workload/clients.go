package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
)

// buyer is the flash-sale transaction on a random hot sku: BEGIN; SELECT
// stock [FOR UPDATE]; UPDATE stock = <read - 1>; INSERT order; COMMIT, or
// when sold out a refill (UPDATE stock = <read + restockQty>; INSERT
// restock). Half the reads are plain SELECTs in the transaction, which only
// the read_in_txn lock makes safe; half the statements are prepared.
func (w *Workload) buyer(inst, client int) op {
	return func(ctx context.Context, rng *rand.Rand) (err error) {
		k := int64(1 + rng.IntN(HotSKUs))
		prepared, forUpdate := rng.IntN(2) == 0, rng.IntN(2) == 0
		proto := protoName(prepared)
		tx, err := w.pools[inst].BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		q, args := stmt(prepared, "SELECT stock FROM sku_stock WHERE sku_id = %d", k)
		kind := "txn SELECT stock (read_in_txn)"
		if forUpdate {
			q += " FOR UPDATE"
			kind = "txn SELECT stock FOR UPDATE"
		}
		var stock int64
		if err = tx.QueryRowContext(ctx, q, args...).Scan(&stock); err != nil {
			return err
		}
		w.t.Add(kind+", "+proto, 1)
		if stock < 0 {
			return fmt.Errorf("%w: sku %d stock %d", errCheck, k, stock)
		}
		if stock > 0 {
			if err = execTx(ctx, tx, prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", stock-1, k); err != nil {
				return err
			}
			if err = execTx(ctx, tx, prepared, "INSERT INTO orders (sku_id, buyer) VALUES (%d, %d)", k, int64(client)); err != nil {
				return err
			}
			if err = tx.Commit(); err != nil {
				return err
			}
			w.t.Add("txn UPDATE stock + INSERT order + COMMIT (a sale), "+proto, 1)
			return nil
		}
		if err = execTx(ctx, tx, prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", stock+restockQty, k); err != nil {
			return err
		}
		if err = execTx(ctx, tx, prepared, "INSERT INTO restocks (sku_id, qty) VALUES (%d, %d)", k, restockQty); err != nil {
			return err
		}
		if err = tx.Commit(); err != nil {
			return err
		}
		w.t.Add("txn UPDATE stock + INSERT restock + COMMIT (sold out, refill), "+proto, 1)
		return nil
	}
}

// reader sends autocommit reads (routed to the replica): a point read of a
// guarded row as text, a long-lived prepared statement on the catalog, a
// per-call prepared range read; and now and then an unguarded autocommit
// write.
func (w *Workload) reader(inst int, st *sql.Stmt) op {
	return func(ctx context.Context, rng *rand.Rand) error {
		p := w.pools[inst]
		switch r := rng.IntN(20); {
		case r < 8:
			var stock int64
			q := fmt.Sprintf("SELECT stock FROM sku_stock WHERE sku_id = %d", 1+rng.IntN(HotSKUs))
			if err := p.QueryRowContext(ctx, q).Scan(&stock); err != nil {
				return err
			}
			w.t.Add("autocommit SELECT sku_stock, text", 1)
		case r < 15:
			var id, price int64
			var name string
			if err := st.QueryRowContext(ctx, 1+rng.IntN(catalogRows)).Scan(&id, &name, &price); err != nil {
				return err
			}
			w.t.Add("autocommit SELECT catalog, prepared (long-lived stmt)", 1)
		case r < 19:
			lo := 1 + rng.IntN(catalogRows-20)
			rows, err := p.QueryContext(ctx, "SELECT id, name, price FROM catalog WHERE id BETWEEN ? AND ?", lo, lo+19)
			if err != nil {
				return err
			}
			n, err := drain(rows, 3)
			if err != nil {
				return err
			}
			if n != 20 {
				return fmt.Errorf("%w: range read got %d rows, want 20", errCheck, n)
			}
			w.t.Add("autocommit SELECT catalog range, prepared (per call)", 1)
		default:
			q := fmt.Sprintf("UPDATE catalog SET views = views + 1 WHERE id = %d", 1+rng.IntN(catalogRows))
			if _, err := p.ExecContext(ctx, q); err != nil {
				return err
			}
			w.t.Add("autocommit UPDATE catalog (unguarded), text", 1)
		}
		return nil
	}
}

// counter is the read-then-write on one connection that the rewrite rule
// makes safe: SELECT n; UPDATE SET n = <read + 1>. An UPDATE that changed
// the row is an increment the table must show.
func (w *Workload) counter(inst int) op {
	return func(ctx context.Context, rng *rand.Rand) error {
		k := int64(1 + rng.IntN(counterKeys))
		prepared := rng.IntN(2) == 0
		proto := protoName(prepared)
		c, err := w.pools[inst].Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		var n int64
		q, a := stmt(prepared, "SELECT n FROM counters WHERE id = %d", k)
		if err := c.QueryRowContext(ctx, q, a...).Scan(&n); err != nil {
			return err
		}
		w.t.Add("rewrite SELECT n, "+proto, 1)
		q, a = stmt(prepared, "UPDATE counters SET n = %d WHERE id = %d", n+1, k)
		res, err := c.ExecContext(ctx, q, a...)
		if err != nil {
			return err
		}
		if ra, _ := res.RowsAffected(); ra == 1 {
			w.t.CountIncrement()
			w.t.Add("rewrite UPDATE n = <read+1> (changed the row), "+proto, 1)
		} else {
			w.t.Add("rewrite UPDATE n = <read+1> (0 rows: conflict), "+proto, 1)
		}
		return nil
	}
}

// bigRead reads the whole catalog (catalogRows rows) to the last row,
// alternately as text and prepared.
func (w *Workload) bigRead(inst int) op {
	var flip atomic.Bool
	return func(ctx context.Context, _ *rand.Rand) error {
		prepared := flip.Load()
		flip.Store(!prepared)
		q, a := "SELECT * FROM catalog", []any(nil)
		if prepared {
			q, a = "SELECT * FROM catalog WHERE id > ?", []any{0}
		}
		rows, err := w.pools[inst].QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		n, err := drain(rows, 5)
		if err != nil {
			return err
		}
		if n != catalogRows {
			return fmt.Errorf("%w: full read got %d rows, want %d", errCheck, n, catalogRows)
		}
		w.t.Add("SELECT * FROM catalog ("+strconv.Itoa(catalogRows)+" rows), "+protoName(prepared), 1)
		return nil
	}
}
