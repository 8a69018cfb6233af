package streaming

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

const (
	database = "benchstream"
	table    = "big"
)

// ensureTable creates benchstream.big with rows rows on the primary, unless
// it already holds exactly that many. The rows come from MariaDB's sequence
// engine in one INSERT ... SELECT, kept out of the binary log
// (sql_log_bin=0) so the replica does not spend the CPU the measurement
// needs.
func ensureTable(ctx context.Context, e *env.Env, rows int) error {
	db, err := sql.Open("mysql", e.Bed.DSN(e.Bed.Primary, ""))
	if err != nil {
		return fmt.Errorf("streaming: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one session, so sql_log_bin=0 holds for every statement
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var n int
	err = db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", database, table)).Scan(&n)
	if err == nil && n == rows {
		e.Log.Printf("streaming: %s.%s already holds %d rows", database, table, n)
		return nil
	}
	start := time.Now()
	stmts := []string{
		"SET SESSION sql_log_bin = 0",
		"CREATE DATABASE IF NOT EXISTS " + database,
		fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", database, table),
		fmt.Sprintf(`CREATE TABLE %s.%s (
			id INT NOT NULL PRIMARY KEY,
			k INT NOT NULL,
			c CHAR(64) NOT NULL,
			pad VARCHAR(40) NOT NULL
		) ENGINE=InnoDB`, database, table),
		fmt.Sprintf(`INSERT INTO %s.%s (id, k, c, pad)
			SELECT seq, seq * 7919 %% 100003, SHA2(seq, 256), REPEAT(CHAR(97 + seq %% 26), 40)
			FROM %s.seq_1_to_%d`, database, table, database, rows),
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("streaming: build table: %s: %w", firstWords(s), err)
		}
	}
	e.Log.Printf("streaming: built %s.%s with %d rows in %s", database, table, rows, time.Since(start).Round(time.Millisecond))
	return nil
}

func firstWords(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
