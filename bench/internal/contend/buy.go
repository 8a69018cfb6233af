package contend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// Outcome is how one attempt of an Op ended when it returned no error.
type Outcome int

const (
	// Done: the write happened (an order was taken, a unit decremented).
	Done Outcome = iota
	// SoldOut: the stock read (or the guard) said there is nothing left.
	SoldOut
	// Conflict: the write changed no row although stock was seen; the
	// caller tries again (a rewritten UPDATE lost its race).
	Conflict
)

// Op is one attempt of an application operation by client number client.
// An error for which Retryable is true means "try again". Ops are safe for
// concurrent use by distinct clients.
type Op func(ctx context.Context, client int) (Outcome, error)

// Key picks the sku a client works on.
type Key func(client int) int64

// HotKey sends every client to sku 1.
func HotKey(int) int64 { return 1 }

// OwnKey gives client i sku i+1.
func OwnKey(client int) int64 { return int64(client) + 1 }

// Pools spreads clients over handles: client i uses pools[i%len(pools)].
// Like *sql.DB it is safe for concurrent use.
type Pools []*sql.DB

func (p Pools) of(client int) *sql.DB { return p[client%len(p)] }

// Retryable reports the errors a client is told to retry: lock wait timeout
// (1205) and deadlock (1213), from lockproxy or from InnoDB.
func Retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1205 || me.Number == 1213)
}

// TxnStyle says how TxnReadWrite reads the stock.
type TxnStyle struct {
	Prepared  bool // placeholders (server-side prepared) instead of literal text
	ForUpdate bool // SELECT ... FOR UPDATE instead of a plain SELECT
	Order     bool // INSERT an order row after the UPDATE
	// Guarded sends the UPDATE a delta rewrite rule with min 0 sends in
	// place of the absolute one (SET stock = stock - 1 WHERE sku_id = k
	// AND stock - 1 >= 0); a decrement that changed no row is sold out.
	Guarded bool
}

// TxnReadWrite is the read-then-write transaction: BEGIN; SELECT stock;
// UPDATE SET stock = <read-1>; [INSERT order;] COMMIT. Without ForUpdate
// and without lockproxy it oversells and loses updates.
func TxnReadWrite(pools Pools, key Key, st TxnStyle) Op {
	sel := "SELECT stock FROM sku_stock WHERE sku_id = "
	return func(ctx context.Context, client int) (out Outcome, err error) {
		k := key(client)
		tx, err := pools.of(client).BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		var stock int64
		q, args := sel+"?", []any{k}
		if !st.Prepared {
			q, args = fmt.Sprintf("%s%d", sel, k), nil
		}
		if st.ForUpdate {
			q += " FOR UPDATE"
		}
		if err = tx.QueryRowContext(ctx, q, args...).Scan(&stock); err != nil {
			return 0, err
		}
		if stock <= 0 {
			return SoldOut, tx.Rollback()
		}
		if st.Guarded {
			q, a := statement(st.Prepared, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d AND stock - 1 >= 0", []int64{k})
			res, err := tx.ExecContext(ctx, q, a...)
			if err != nil {
				return 0, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return SoldOut, tx.Rollback()
			}
		} else if err = execTx(ctx, tx, st.Prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", stock-1, k); err != nil {
			return 0, err
		}
		if st.Order {
			if err = execTx(ctx, tx, st.Prepared, "INSERT INTO orders (sku_id, buyer) VALUES (%d, %d)", k, int64(client)); err != nil {
				return 0, err
			}
		}
		return Done, tx.Commit()
	}
}

// execTx runs format with args either as literal text or with each %d as a
// placeholder bound to its argument.
func execTx(ctx context.Context, tx *sql.Tx, prepared bool, format string, args ...int64) error {
	q, a := statement(prepared, format, args)
	_, err := tx.ExecContext(ctx, q, a...)
	return err
}

func statement(prepared bool, format string, args []int64) (string, []any) {
	if !prepared {
		fa := make([]any, len(args))
		for i, v := range args {
			fa[i] = v
		}
		return fmt.Sprintf(format, fa...), nil
	}
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	ph := make([]any, len(args))
	for i := range ph {
		ph[i] = placeholder{}
	}
	return fmt.Sprintf(format, ph...), a
}

// placeholder formats as "?" under %d.
type placeholder struct{}

// Format implements fmt.Formatter.
func (placeholder) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("?")) }

// AutocommitReadWrite is the read-then-write without a transaction: on one
// connection (db.Conn per attempt, as a request handler would hold it),
// SELECT stock; UPDATE SET stock = <read-1>; and, when the UPDATE changed
// the row, [INSERT order]. A rewrite rule makes the UPDATE relative and
// guarded; 0 rows changed is then a Conflict (or SoldOut when the next read
// says so).
func AutocommitReadWrite(pools Pools, key Key, prepared, order bool) Op {
	return readThenWrite(pools, key, prepared, order, func(stock, k int64) (string, []int64) {
		return "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", []int64{stock - 1, k}
	})
}

// readThenWrite reads the key's stock on one pooled connection, then sends
// the UPDATE that write builds from it (a format for statement and its
// arguments) and, with order, the INSERT of the order. A decrement counts
// when the UPDATE changed the row.
func readThenWrite(pools Pools, key Key, prepared, order bool, write func(stock, k int64) (string, []int64)) Op {
	return func(ctx context.Context, client int) (Outcome, error) {
		k := key(client)
		c, err := pools.of(client).Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		var stock int64
		q, a := statement(prepared, "SELECT stock FROM sku_stock WHERE sku_id = %d", []int64{k})
		if err := c.QueryRowContext(ctx, q, a...).Scan(&stock); err != nil {
			return 0, err
		}
		if stock <= 0 {
			return SoldOut, nil
		}
		format, args := write(stock, k)
		q, a = statement(prepared, format, args)
		res, err := c.ExecContext(ctx, q, a...)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return Conflict, nil
		}
		if order {
			q, a = statement(prepared, "INSERT INTO orders (sku_id, buyer) VALUES (%d, %d)", []int64{k, int64(client)})
			if _, err := c.ExecContext(ctx, q, a...); err != nil {
				return 0, err
			}
		}
		return Done, nil
	}
}

// Atomic is the single safe statement a careful application sends:
// UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = ? AND stock > 0.
func Atomic(pools Pools, key Key, prepared bool) Op {
	return func(ctx context.Context, client int) (Outcome, error) {
		q, a := statement(prepared, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d AND stock > 0", []int64{key(client)})
		res, err := pools.of(client).ExecContext(ctx, q, a...)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return SoldOut, nil
		}
		return Done, nil
	}
}

// RewrittenPair is what lockproxy sends MariaDB for AutocommitReadWrite
// under a delta rewrite rule with min 0: the SELECT, then the guarded
// relative UPDATE (SET stock = stock - 1 WHERE sku_id = k AND stock - 1 >= 0)
// in place of the absolute one. Sent directly it is the cost of the two
// statements themselves; through a bare relay, the floor for the rewrite
// through any proxy. A decrement counts when the UPDATE changed the row.
func RewrittenPair(pools Pools, key Key, prepared bool) Op {
	return readThenWrite(pools, key, prepared, false, func(_, k int64) (string, []int64) {
		return "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d AND stock - 1 >= 0", []int64{k}
	})
}

// Decrement is a keyed autocommit UPDATE with no guard of its own
// (UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = k): what a lock
// rule on `write` guards.
func Decrement(pools Pools, key Key, prepared bool) Op {
	return func(ctx context.Context, client int) (Outcome, error) {
		q, a := statement(prepared, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d", []int64{key(client)})
		_, err := pools.of(client).ExecContext(ctx, q, a...)
		if err != nil {
			return 0, err
		}
		return Done, nil
	}
}
