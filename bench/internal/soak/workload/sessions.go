package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// churn opens a fresh connection, runs one query and closes it, alternating
// instances; every 20th login uses a wrong password and must get 1045.
func (w *Workload) churn() op {
	var n atomic.Int64
	return func(ctx context.Context, _ *rand.Rand) error {
		i := n.Add(1)
		addr := w.addrs[int(i)%len(w.addrs)]
		bad := i%20 == 0
		if bad { // alternate the instances that see the wrong passwords too
			addr = w.addrs[int(i/20)%len(w.addrs)]
		}
		dsn := w.bed.DSN(addr, database)
		if bad {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return fmt.Errorf("soak: dsn: %w", err)
			}
			cfg.Passwd += "-wrong"
			dsn = cfg.FormatDSN()
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return fmt.Errorf("soak: open: %w", err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		if bad {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1045 {
				w.t.Add("login with a wrong password (refused with 1045)", 1)
				return nil
			}
			if err == nil {
				return fmt.Errorf("%w: login with a wrong password was accepted", errCheck)
			}
			return err
		}
		if err != nil {
			return err
		}
		w.t.Add("fresh connection: connect, SELECT 1, close", 1)
		return nil
	}
}

// abandoner begins a transaction that takes a row's lock, then drops the
// connection without COMMIT (alternately an abrupt TCP close and a polite
// COM_QUIT); a transaction on the other instance must then get the row
// within ReleaseBound. Every other time the row is the dedicated AbandonSKU
// and the abandoned transaction also decrements it, which must be rolled
// back; otherwise it is a hot sku, locked only.
func (w *Workload) abandoner() op {
	var n atomic.Int64
	return func(ctx context.Context, _ *rand.Rand) error {
		i := n.Add(1)
		inst := int(i) % len(w.addrs)
		k, write := int64(AbandonSKU), i%2 == 0
		if !write {
			k = 1 + i%HotSKUs
		}
		abrupt := i%4 < 2
		cfg, err := mysql.ParseDSN(w.bed.DSN(w.addrs[inst], database))
		if err != nil {
			return fmt.Errorf("soak: dsn: %w", err)
		}
		var raw net.Conn
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			raw = c
			return c, err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return fmt.Errorf("soak: connector: %w", err)
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		db.SetMaxOpenConns(1)
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			_ = c.Close()
			return err
		}
		var stock int64
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ? FOR UPDATE", k).Scan(&stock)
		if err == nil && write {
			_, err = tx.ExecContext(ctx, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = ?", k)
		}
		if err != nil {
			_ = tx.Rollback()
			_ = c.Close()
			return err
		}
		how := dropConn(c, raw, abrupt)
		_ = tx.Rollback() // the driver's side only; the connection is gone
		_ = c.Close()
		w.t.Add("abandoned txn holding a row lock ("+how+")", 1)
		return w.checkRelease(ctx, (inst+1)%len(w.addrs), k)
	}
}

// dropConn drops c, whose transaction is open, without COMMIT: abruptly
// (a TCP reset on raw, its socket, as a crashed client) or politely (a
// COM_QUIT). It returns how, for the tally.
func dropConn(c *sql.Conn, raw net.Conn, abrupt bool) string {
	if abrupt {
		if tc, ok := raw.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, as a crashed client
		}
		_ = raw.Close()
		return "TCP reset"
	}
	_ = c.Raw(func(dc any) error {
		if cl, ok := dc.(interface{ Close() error }); ok {
			return cl.Close() // COM_QUIT without COMMIT
		}
		return nil
	})
	return "COM_QUIT"
}

// checkRelease takes row k's lock in a transaction through instance inst
// and records how long it took.
func (w *Workload) checkRelease(ctx context.Context, inst int, k int64) error {
	start := time.Now()
	var tx *sql.Tx
	var took time.Duration
	for {
		var err error
		if tx, err = w.pools[inst].BeginTx(ctx, nil); err != nil {
			return err
		}
		var stock int64
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ? FOR UPDATE", k).Scan(&stock)
		took = time.Since(start)
		if err == nil {
			break
		}
		_ = tx.Rollback()
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 && took < ReleaseBound {
			w.t.Fail(err) // a wound-wait victim: counted, and tried again
			continue
		}
		w.t.slowReleases.Add(1)
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.t.release(took)
	w.t.Add("txn on the abandoned row through the other instance (got the lock)", 1)
	return nil
}
