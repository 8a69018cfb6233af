package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// The flash-sale rows the invariants judge the tables against.
const (
	// HotSKUs is how many skus (1..HotSKUs) the flash sale sells.
	HotSKUs = 4
	// InitialStock is each hot sku's stock at the start; a sold-out sku is
	// refilled by restockQty.
	InitialStock = 200
	// AbandonSKU is the row abandoned transactions write to; it is never sold.
	AbandonSKU = 100
	// AbandonStock is AbandonSKU's stock, which an abandoned write must not
	// change.
	AbandonStock = 1000
)

// Schema and workload shape.
const (
	database    = "bench_soak"
	restockQty  = 200  // units a refill adds
	counterKeys = 4    // rows of the rewrite table
	catalogRows = 4000 // the table read in full now and then

	buyersPerInstance   = 4
	readersPerInstance  = 2
	countersPerInstance = 2
	bigPerInstance      = 1
	// plus one connection churner and one abandoner spread over both
	// instances: 2*(4+2+2+1)+2 = 20 client goroutines.

	// buyerPause and the five below are the mean pause between two
	// operations of one client of each kind (each pause is drawn from ±50%
	// of it): the pacing that keeps the 20 clients from saturating a
	// 2-core host.
	buyerPause   = 60 * time.Millisecond
	readerPause  = 25 * time.Millisecond
	counterPause = 40 * time.Millisecond
	bigReadPause = 5 * time.Second
	churnPause   = time.Second
	abandonPause = 10 * time.Second

	opTimeout = 30 * time.Second // per statement group; never the stop signal
	// ReleaseBound is how soon a lock held by a client that disconnected
	// inside its transaction must be free again: well under the 10 s lease,
	// so a lock that merely expired fails the check.
	ReleaseBound = 5 * time.Second
)

// RulesYAML guards sku_stock by sku_id (writes, locking reads and reads in
// a transaction) and rewrites read-then-write UPDATEs of counters.n in delta
// mode, pairing a write with the read of its connection (scope: session:
// counter holds one connection per operation, in autocommit); orders,
// restocks and catalog are unguarded.
func RulesYAML() string {
	return contend.LockRule(database, "write, locking_read, read_in_txn") +
		"  - name: counters\n    table: " + database + ".counters\n    key: [id]\n    lock: []\n" +
		"    rewrite:\n      column: n\n      mode: delta\n      scope: session\n"
}

// SetupSchema creates bench_soak on the primary and fills it; the returned
// pool is direct on the primary, for the checks. The caller closes it.
func SetupSchema(ctx context.Context, e *env.Env) (*sql.DB, error) {
	db, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return nil, err
	}
	stmts := []string{
		"CREATE INDEX orders_sku ON orders (sku_id)",
		"CREATE TABLE restocks (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku_id BIGINT NOT NULL, qty BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE counters (id BIGINT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE catalog (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, price BIGINT NOT NULL, views BIGINT NOT NULL DEFAULT 0, pad VARCHAR(100) NOT NULL) ENGINE=InnoDB",
		fmt.Sprintf("INSERT INTO catalog (id, name, price, pad) SELECT seq, CONCAT('item-', seq), seq %% 997, REPEAT('x', 80) FROM seq_1_to_%d", catalogRows),
	}
	var vals []string
	for k := 1; k <= HotSKUs; k++ {
		vals = append(vals, fmt.Sprintf("(%d,%d)", k, InitialStock))
	}
	vals = append(vals, fmt.Sprintf("(%d,%d)", AbandonSKU, AbandonStock))
	stmts = append(stmts, "INSERT INTO sku_stock (sku_id, stock) VALUES "+strings.Join(vals, ","))
	vals = vals[:0]
	for k := 1; k <= counterKeys; k++ {
		vals = append(vals, fmt.Sprintf("(%d,0)", k))
	}
	stmts = append(stmts, "INSERT INTO counters (id, n) VALUES "+strings.Join(vals, ","))
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("soak: schema: %s: %w", s, err)
		}
	}
	return db, nil
}

// WaitReplica waits (at most 60 s) until the bed's replica has the filled
// schema.
func WaitReplica(ctx context.Context, bed *env.Bed) error {
	if bed.Replica == "" {
		return errors.New("soak: the bed has no replica")
	}
	db, err := sql.Open("mysql", bed.DSN(bed.Replica, ""))
	if err != nil {
		return fmt.Errorf("soak: replica: %w", err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n, c int
		err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+database+".catalog), (SELECT COUNT(*) FROM "+database+".counters)").Scan(&n, &c)
		if err == nil && n == catalogRows && c == counterKeys {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: replica has not applied the schema after 60 s (last: %d catalog rows, %v)", n, err)
		}
		if err := SleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// SleepCtx sleeps for d or until ctx ends (then it returns an error
// wrapping ctx's).
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("soak: interrupted: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
