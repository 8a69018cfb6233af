package proxy

import (
	"testing"
	"time"
)

// TestSetStatementLocks: a guarded UPDATE run by MariaDB's SET STATEMENT
// max_statement_time=... FOR (Connector/Node's query timeout) takes the
// row's lock as the UPDATE alone does, as text and prepared: it waits
// while another session holds the row and runs once the row is free; the
// client's prefix reaches MariaDB (sql_select_limit applies); a SET
// STATEMENT of sql_mode is still a text lockproxy cannot read, refused on
// a guarded table.
func TestSetStatementLocks(t *testing.T) {
	p, db, direct := skuProxy(t, "(1, 10), (2, 10)")
	holder := p.db(t, db, "")
	c := p.db(t, db, "")
	c.SetMaxOpenConns(1)
	stock := func(id int) int { return skuStock(t, direct, id) }

	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE sku SET stock = stock WHERE sku_id = 1"); err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		name string
		exec func() error
	}{
		{"text", func() error {
			_, err := c.Exec("SET STATEMENT max_statement_time=5 FOR UPDATE sku SET stock = 1 WHERE sku_id = 1")
			return err
		}},
		{"prepared", func() error {
			_, err := c.Exec("SET STATEMENT max_statement_time=5, innodb_lock_wait_timeout=5 FOR UPDATE sku SET stock = ? WHERE sku_id = ?", 1, 1)
			return err
		}},
	} {
		begin := time.Now()
		err := run.exec()
		if me := mysqlErr(t, err); me.Number != 1205 {
			t.Fatalf("%s: want 1205 while row 1 is held, got %v", run.name, me)
		}
		if time.Since(begin) < 200*time.Millisecond {
			t.Fatalf("%s: answered before the wait timeout", run.name)
		}
	}
	if _, err := c.Exec("SET STATEMENT max_statement_time=5 FOR UPDATE sku SET stock = 1 WHERE sku_id = 2"); err != nil {
		t.Fatalf("a free row: %v", err)
	}
	if _, err := c.Exec("SET STATEMENT max_statement_time=5 FOR UPDATE sku SET stock = ? WHERE sku_id = ?", 2, 2); err != nil {
		t.Fatalf("a free row, prepared: %v", err)
	}
	rows, err := c.Query("SET STATEMENT sql_select_limit=1 FOR SELECT sku_id FROM sku WHERE sku_id IN (1, 2)")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Close(); err != nil || n != 1 {
		t.Fatalf("SET STATEMENT sql_select_limit=1: %d rows (%v); the prefix did not reach MariaDB", n, err)
	}
	_, err = c.Exec("SET STATEMENT sql_mode='' FOR UPDATE sku SET stock = 3 WHERE sku_id = 2")
	wantRefused(t, "SET STATEMENT sql_mode", err)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if stock(1) != 10 || stock(2) != 2 {
		t.Fatalf("stock = %d %d, want 10 2", stock(1), stock(2))
	}
}
