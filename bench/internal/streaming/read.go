package streaming

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// reader is how a client consumes the result: every SleepEvery rows it
// sleeps Sleep (zero: never).
type reader struct {
	SleepEvery int
	Sleep      time.Duration
}

// readAll runs SELECT * FROM big on one connection of db and reads every row
// to the end, returning the rows, the payload bytes and the time from sending
// the query to the last row.
func readAll(ctx context.Context, db *sql.DB, rd reader) (int, int64, time.Duration, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("streaming: connect: %w", err)
	}
	defer conn.Close()
	start := time.Now()
	rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT * FROM %s.%s", database, table))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("streaming: query: %w", err)
	}
	defer rows.Close()
	var id, k, c, pad sql.RawBytes
	var n int
	var bytes int64
	for rows.Next() {
		if err := rows.Scan(&id, &k, &c, &pad); err != nil {
			return n, bytes, 0, fmt.Errorf("streaming: scan: %w", err)
		}
		n++
		bytes += int64(len(id) + len(k) + len(c) + len(pad))
		if rd.SleepEvery > 0 && n%rd.SleepEvery == 0 {
			time.Sleep(rd.Sleep)
		}
	}
	if err := rows.Err(); err != nil {
		return n, bytes, 0, fmt.Errorf("streaming: after %d rows: %w", n, err)
	}
	return n, bytes, time.Since(start), nil
}
