package workload

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// drain reads rows to the end, scanning cols columns as raw bytes.
func drain(rows *sql.Rows, cols int) (int, error) {
	defer rows.Close()
	dest := make([]any, cols)
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// protoName names the protocol of a statement.
func protoName(prepared bool) string {
	if prepared {
		return "prepared"
	}
	return "text"
}

// stmt renders format with its %d arguments as literal text, or with each
// %d as a placeholder bound to its argument (a server-side prepared
// statement: the DSN has interpolateParams=false).
func stmt(prepared bool, format string, args ...int64) (string, []any) {
	fa := make([]any, len(args))
	for i, v := range args {
		fa[i] = v
	}
	if !prepared {
		return fmt.Sprintf(format, fa...), nil
	}
	return strings.ReplaceAll(format, "%d", "?"), fa
}

// execTx runs one statement of format in tx.
func execTx(ctx context.Context, tx *sql.Tx, prepared bool, format string, args ...int64) error {
	q, a := stmt(prepared, format, args...)
	_, err := tx.ExecContext(ctx, q, a...)
	return err
}
