package contend

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// TableName is the guarded table every contention scenario uses, in its own
// database so scenarios never see each other's rows.
const TableName = "sku_stock"

// RedisLocks is the `locks:` body for the bed's Redis with a 10 s lease and
// a 10 s wait_timeout.
func RedisLocks(redisAddr string) string {
	return fmt.Sprintf("  backend: redis\n  redis:\n    addrs: [%s]\n  ttl: 10s\n  wait_timeout: 10s\n", redisAddr)
}

// LingerLocks is RedisLocks with locks.redis.linger set to linger (a
// duration such as "2ms").
func LingerLocks(redisAddr, linger string) string {
	return strings.Replace(RedisLocks(redisAddr), "    addrs:", "    linger: "+linger+"\n    addrs:", 1)
}

// ReleaseWindowLocks is RedisLocks with locks.redis.release_window set to
// window (a duration such as "1ms").
func ReleaseWindowLocks(redisAddr, window string) string {
	return strings.Replace(RedisLocks(redisAddr), "    addrs:", "    release_window: "+window+"\n    addrs:", 1)
}

// LockRule is a rule guarding db.sku_stock by sku_id with the given lock
// kinds, e.g. "write, locking_read, read_in_txn".
func LockRule(db, kinds string) string {
	return fmt.Sprintf("  - name: sku-stock\n    table: %s.%s\n    key: [sku_id]\n    lock: [%s]\n    on_unkeyed: reject\n", db, TableName, kinds)
}

// RewriteRule is a rule rewriting db.sku_stock.stock (mode delta, min 0)
// that takes no lock, for AutocommitReadWrite: its read and write share
// one connection held per request (scope: session) and it checks affected
// rows (on_conflict: zero_rows).
func RewriteRule(db string) string {
	return OptimisticRule(db) + "      scope: session\n      on_conflict: zero_rows\n"
}

// OptimisticRule is a rule rewriting db.sku_stock.stock (mode delta, min
// 0) that takes no lock, with the rewrite defaults (scope transaction, a
// lost race is an error): the conditional UPDATE is the only guarantee,
// for TxnReadWrite.
func OptimisticRule(db string) string {
	return fmt.Sprintf("  - name: sku-stock\n    table: %s.%s\n    key: [sku_id]\n    lock: []\n    rewrite:\n      column: stock\n      mode: delta\n      min: 0\n", db, TableName)
}

// Open opens a pool on addr/db holding up to conns connections and pings it.
func Open(ctx context.Context, e *env.Env, addr, db string, conns int) (*sql.DB, error) {
	p, err := sql.Open("mysql", e.Bed.DSN(addr, db))
	if err != nil {
		return nil, fmt.Errorf("contend: open %s: %w", addr, err)
	}
	p.SetMaxOpenConns(conns)
	p.SetMaxIdleConns(conns)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.PingContext(ctx); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("contend: ping %s: %w", addr, err)
	}
	return p, nil
}

// Fresh drops and creates database db on the primary with the sku_stock and
// orders tables, and returns a small pool on it for setup and checks.
func Fresh(ctx context.Context, e *env.Env, db string) (*sql.DB, error) {
	admin, err := Open(ctx, e, e.Bed.Primary, "", 2)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for _, s := range []string{"DROP DATABASE IF EXISTS `" + db + "`", "CREATE DATABASE `" + db + "`"} {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("contend: %s: %w", s, err)
		}
	}
	p, err := Open(ctx, e, e.Bed.Primary, db, 4)
	if err != nil {
		return nil, err
	}
	for _, s := range []string{
		"CREATE TABLE sku_stock (sku_id BIGINT PRIMARY KEY, stock BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku_id BIGINT NOT NULL, buyer VARCHAR(64) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := p.ExecContext(ctx, s); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("contend: create table: %w", err)
		}
	}
	return p, nil
}

// Reset empties orders and gives skus 1..keys the stock each.
func Reset(ctx context.Context, db *sql.DB, keys int, stock int64) error {
	for _, s := range []string{"TRUNCATE TABLE orders", "TRUNCATE TABLE sku_stock"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("contend: reset: %w", err)
		}
	}
	const batch = 500
	for lo := 1; lo <= keys; lo += batch {
		q := "INSERT INTO sku_stock (sku_id, stock) VALUES "
		for k := lo; k < lo+batch && k <= keys; k++ {
			if k > lo {
				q += ","
			}
			q += fmt.Sprintf("(%d,%d)", k, stock)
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("contend: reset: %w", err)
		}
	}
	return nil
}

// State is what the tables hold after a run.
type State struct {
	Stock  int64 // sum of stock over all skus
	Orders int64
}

// ReadState sums the stock and counts the orders, directly on the primary.
func ReadState(ctx context.Context, db *sql.DB) (State, error) {
	var s State
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock),0) FROM sku_stock").Scan(&s.Stock); err != nil {
		return s, fmt.Errorf("contend: read stock: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&s.Orders); err != nil {
		return s, fmt.Errorf("contend: count orders: %w", err)
	}
	return s, nil
}

// Handles opens one pool per address for clients clients spread over them
// (client i on addrs[i%len]), each pool warmed to its share of connections
// so that connecting is not part of the timed run. close closes them all.
func Handles(ctx context.Context, e *env.Env, addrs []string, db string, clients int) (Pools, func(), error) {
	var ps Pools
	closeAll := func() {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	share := (clients + len(addrs) - 1) / len(addrs)
	for _, a := range addrs {
		p, err := Open(ctx, e, a, db, share)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ps = append(ps, p)
		if err := warm(ctx, p, share); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return ps, closeAll, nil
}

// warm opens n connections on p and returns them to its idle set.
func warm(ctx context.Context, p *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := p.Conn(ctx)
		if err != nil {
			return fmt.Errorf("contend: warm pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}
