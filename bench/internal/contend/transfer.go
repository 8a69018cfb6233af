package contend

import (
	"context"
	"math/rand/v2"
)

// TransferStyle says how Transfer reads the balances.
type TransferStyle struct {
	Prepared  bool // placeholders (server-side prepared) instead of literal text
	ForUpdate bool // SELECT ... FOR UPDATE instead of plain SELECTs
}

// Transfer is the bank transaction over skus 1..keys used as accounts
// (stock is the balance): BEGIN; read the balances of two distinct random
// accounts, one SELECT each; write both back as absolute values, one
// UPDATE each, moving 1..100 from the first to the second; COMMIT. Money
// only moves, so the total never changes when every transfer is
// isolated. Without ForUpdate and without lockproxy it loses updates
// (the total drifts).
func Transfer(pools Pools, keys int, st TransferStyle) Op {
	sel := "SELECT stock FROM sku_stock WHERE sku_id = %d"
	if st.ForUpdate {
		sel += " FOR UPDATE"
	}
	return func(ctx context.Context, client int) (out Outcome, err error) {
		from := 1 + rand.Int64N(int64(keys))
		to := 1 + (from+rand.Int64N(int64(keys-1)))%int64(keys)
		amount := 1 + rand.Int64N(100)
		tx, err := pools.of(client).BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		var bal [2]int64
		for i, k := range []int64{from, to} {
			q, a := statement(st.Prepared, sel, []int64{k})
			if err = tx.QueryRowContext(ctx, q, a...).Scan(&bal[i]); err != nil {
				return 0, err
			}
		}
		if bal[0] < amount {
			return SoldOut, tx.Rollback()
		}
		if err = execTx(ctx, tx, st.Prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", bal[0]-amount, from); err != nil {
			return 0, err
		}
		if err = execTx(ctx, tx, st.Prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", bal[1]+amount, to); err != nil {
			return 0, err
		}
		return Done, tx.Commit()
	}
}
