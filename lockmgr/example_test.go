package lockmgr_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
)

// ExampleSet: a transaction's locks. Keys already held cost nothing, one statement's
// new keys can be given back alone (a statement the server refused), and
// the rest goes at the end of the transaction. A second owner waits for a
// held key until its context ends.
func ExampleSet() {
	ctx := context.Background()
	locker := memlock.New(nil, nil)
	defer locker.Close()
	key := func(names ...string) []lockmgr.Key {
		var ks []lockmgr.Key
		for _, n := range names {
			ks = append(ks, lockmgr.Key{Name: n, Rule: "sku-stock"})
		}
		return ks
	}
	txn := lockmgr.NewSet(locker, lockmgr.Owner{Instance: "a", Session: 1, Txn: 1, Start: time.Now()})
	if err := txn.Acquire(ctx, key("shop.sku_stock/1001")); err != nil {
		panic(err)
	}
	mark := txn.Mark()
	if err := txn.Acquire(ctx, key("shop.sku_stock/1001", "shop.sku_stock/1002")); err != nil {
		panic(err)
	}
	fmt.Println(txn.Len())
	_ = txn.ReleaseSince(ctx, mark) // the statement that took 1002 was refused
	fmt.Println(txn.Len(), txn.Holds("shop.sku_stock/1002"))

	other := lockmgr.NewSet(locker, lockmgr.Owner{Instance: "b", Session: 7, Txn: 1, Start: time.Now()})
	wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := other.Acquire(wait, key("shop.sku_stock/1001"))
	fmt.Println(outcome(err))

	_ = txn.Release(ctx) // COMMIT
	fmt.Println(other.Acquire(ctx, key("shop.sku_stock/1001")))
	// Output:
	// 2
	// 1 false
	// wait timeout
	// <nil>
}

func outcome(err error) string {
	if err != nil && lockmgr.Result(err) == "timeout" {
		return "wait timeout"
	}
	return fmt.Sprint(err)
}
