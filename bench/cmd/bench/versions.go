package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// mariadbVersion asks the primary for VERSION().
func mariadbVersion(ctx context.Context, e *env.Env) (string, error) {
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, ""))
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var v string
	err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	return v, err
}

// redisVersion reads redis_version from INFO server over RESP.
func redisVersion(ctx context.Context, addr string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("no redis address")
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "redis_version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no redis_version in INFO server: %v", sc.Err())
}
