package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// captureExamples saves /debug/locks, SHOW LOCKPROXY LOCKS and SHOW
// LOCKPROXY STATUS as they are at this moment of the run.
func captureExamples(ctx context.Context, o options, db *sql.DB) error {
	body, err := fetch(ctx, o.admin+"/debug/locks")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.examples, "debug-locks.json"), body, 0o644); err != nil {
		return err
	}
	for _, what := range []string{"LOCKS", "STATUS"} {
		text, err := showTable(ctx, db, "SHOW LOCKPROXY "+what)
		if err != nil {
			return err
		}
		name := "show-lockproxy-" + strings.ToLower(what) + ".txt"
		if err := os.WriteFile(filepath.Join(o.examples, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// showTable runs q and renders its result as the mariadb client's
// vertical-less tab-aligned text.
func showTable(ctx context.Context, db *sql.DB, q string) (string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return "", fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "mysql> %s;\n", q)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		cells := make([]string, len(cols))
		for i, v := range vals {
			cells[i] = v.String
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// saveMetricsExcerpt keeps the lock series of /metrics (every bucket of
// the wait histogram included) as they stand after the run.
func saveMetricsExcerpt(o options) error {
	body, err := fetch(context.Background(), o.admin+"/metrics")
	if err != nil {
		return err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "lockproxy_lock") || strings.Contains(line, "lockproxy_queries_total") ||
			strings.Contains(line, "lockproxy_client_connections") {
			out.WriteString(line + "\n")
		}
	}
	return os.WriteFile(filepath.Join(o.examples, "metrics.txt"), out.Bytes(), 0o644)
}
