package env

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver
)

// RoomOnPrimary raises the primary's max_connections to at least n for
// a run that opens many connections, and returns what puts it back.
func (e *Env) RoomOnPrimary(ctx context.Context, n int) (func(), error) {
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, ""))
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	var was int
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.max_connections").Scan(&was); err != nil {
		db.Close()
		return nil, fmt.Errorf("env: reading the primary's max_connections: %w", err)
	}
	if was >= n {
		db.Close()
		return func() {}, nil
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("SET GLOBAL max_connections = %d", n)); err != nil {
		db.Close()
		return nil, fmt.Errorf("env: raising the primary's max_connections: %w", err)
	}
	return func() {
		_, _ = db.ExecContext(context.Background(), fmt.Sprintf("SET GLOBAL max_connections = %d", was))
		db.Close()
	}, nil
}

// OneStatement logs in to addr once and runs SELECT 1.
func (e *Env) OneStatement(ctx context.Context, addr string) error {
	db, err := sql.Open("mysql", e.Bed.DSN(addr, ""))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "SELECT 1")
	return err
}

// CloseConns closes every connection of conns that is not nil.
func CloseConns(conns []*sql.Conn) {
	for _, c := range conns {
		if c != nil {
			_ = c.Close()
		}
	}
}

// OpenConns takes n connections of db, dialers at a time, each having
// run check, and keeps them out of db's pool. A connection that fails to
// open or whose check fails is closed, left nil, and told to fail (which
// may be called from several goroutines at once).
func OpenConns(ctx context.Context, db *sql.DB, n, dialers int, check func(c *sql.Conn, i int) error, fail func(i int, err error)) []*sql.Conn {
	conns := make([]*sql.Conn, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := db.Conn(ctx)
				if err == nil {
					if err = check(c, i); err != nil {
						_ = c.Close()
					}
				}
				if err != nil {
					fail(i, err)
					continue
				}
				conns[i] = c
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return conns
}

// CreateDatabase creates the database name on the primary, directly, if
// it does not exist.
func (e *Env) CreateDatabase(ctx context.Context, name string) error {
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, ""))
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	defer db.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(cctx, "CREATE DATABASE IF NOT EXISTS "+name); err != nil {
		return fmt.Errorf("env: create database %s: %w", name, err)
	}
	return nil
}
