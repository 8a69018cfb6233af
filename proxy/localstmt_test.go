package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// scanAll reads every row as strings ("NULL" for NULL).
func scanAll(t *testing.T, rows *sql.Rows, err error) (cols []string, out []string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ = rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var row []string
		for i, v := range vals {
			if cols[i] == "age_seconds" {
				continue // changes between two reads
			}
			row = append(row, map[bool]string{true: v.String, false: "NULL"}[v.Valid])
		}
		out = append(out, strings.Join(row, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols, out
}

// TestShowLockproxyPrepared: SHOW LOCKPROXY ... prepared (COM_STMT_PREPARE / COM_STMT_EXECUTE, as
// mysql2's execute(), mysqli's prepare() and PDO's native prepares send it)
// answers what the text statement answers, in binary rows.
func TestShowLockproxyPrepared(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (42, 1)")
	p := guardedProxy(t, db, func(r *rules.Rule) { r.WaitTimeout = rules.Duration(10 * time.Second) })
	h := p.db(t, db, "")
	holder, err := h.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	mustConnExec(t, holder, "BEGIN", "UPDATE sku SET stock = stock - 1 WHERE sku_id = 42")
	c := conn(t, h)
	for _, what := range []string{"LOCKS", "RULES", "status"} {
		t.Run(what, func(t *testing.T) {
			q := "SHOW LOCKPROXY " + what
			r, err := c.QueryContext(bg, q)
			textCols, text := scanAll(t, r, err)
			st, err := c.PrepareContext(bg, q)
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			defer st.Close()
			for i := 0; i < 2; i++ {
				r, err := st.QueryContext(bg)
				cols, rows := scanAll(t, r, err)
				if fmt.Sprint(cols) != fmt.Sprint(textCols) {
					t.Errorf("prepared columns %v, text %v", cols, textCols)
				}
				if what != "status" && fmt.Sprint(rows) != fmt.Sprint(text) {
					t.Errorf("execute %d: prepared rows\n%v\ntext rows\n%v", i+1, rows, text)
				}
				if len(rows) == 0 {
					t.Errorf("execute %d: no rows", i+1)
				}
			}
		})
	}
	if _, err := c.PrepareContext(bg, "SHOW LOCKPROXY NOTHING"); mysqlErr(t, err).Number != 1064 {
		t.Errorf("prepare of a bad SHOW LOCKPROXY: want 1064, got %v", err)
	}
	// Backend statements still work around the local ones.
	st, err := c.PrepareContext(bg, "SELECT stock FROM sku WHERE sku_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stock int
	if err := st.QueryRowContext(bg, 42).Scan(&stock); err != nil || stock != 1 {
		t.Fatalf("prepared SELECT after SHOW LOCKPROXY: %d, %v", stock, err)
	}
}
