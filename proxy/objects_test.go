package proxy

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// TestViewsRoutinesTriggers: a write through a view of a guarded table
// takes the table's row lock; views lockproxy cannot key, procedures,
// functions and triggers that may write the table are refused unless the
// rule allows them.
func TestViewsRoutinesTriggers(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10)",
		"CREATE TABLE orders (id INT PRIMARY KEY, sku_id BIGINT, n INT)",
		"CREATE TABLE returns (id INT PRIMARY KEY, sku_id BIGINT, n INT)",
		"CREATE VIEW v_sku AS SELECT sku_id AS id, stock AS qty FROM sku WHERE stock >= 0",
		"CREATE VIEW v_cols (k, q) AS SELECT sku_id, stock FROM sku",
		"CREATE VIEW v_total AS SELECT sku_id, SUM(stock) AS total FROM sku GROUP BY sku_id",
		"CREATE PROCEDURE p_zero() UPDATE sku SET stock = 0",
		"CREATE PROCEDURE p_allowed() UPDATE sku SET stock = stock + 1 WHERE sku_id = 2",
		"CREATE FUNCTION f_take(x BIGINT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN UPDATE sku SET stock = stock - 1 WHERE sku_id = x; RETURN 1; END",
		"CREATE TRIGGER trg_orders AFTER INSERT ON orders FOR EACH ROW UPDATE sku SET stock = stock - NEW.n WHERE sku_id = NEW.sku_id",
		"CREATE TRIGGER trg_returns AFTER INSERT ON returns FOR EACH ROW UPDATE sku SET stock = stock + NEW.n WHERE sku_id = NEW.sku_id",
	)
	p := guardedProxy(t, db, func(r *rules.Rule) {
		r.AllowRoutines = []string{db + ".p_allowed"}
		r.AllowTriggers = []string{db + ".trg_returns"}
	})
	a, b := p.db(t, db, ""), p.db(t, db, "")
	ctx := context.Background()

	// holdRow keeps the proxy's lock on sku_id 1 (a plain read in a
	// transaction: no InnoDB lock, so only lockproxy can make others wait).
	holdRow := func(t *testing.T) *sql.Tx {
		t.Helper()
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var stock int
		if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx
	}
	wantErr := func(t *testing.T, err error, code uint16, parts ...string) {
		t.Helper()
		me := mysqlErr(t, err)
		if me.Number != code || !strings.HasPrefix(me.Message, "lockproxy: ") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("want lockproxy's %d naming the rule, got %v", code, me)
		}
		for _, s := range parts {
			if !strings.Contains(me.Message, s) {
				t.Fatalf("message %q does not say %q", me.Message, s)
			}
		}
	}
	stock := func(t *testing.T, id int) int {
		t.Helper()
		var n int
		if err := base.direct(t, db, "").QueryRow("SELECT stock FROM sku WHERE sku_id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("write through a projection view waits for the base row", func(t *testing.T) {
		holdRow(t)
		for _, q := range []string{
			"UPDATE v_sku SET qty = 5 WHERE id = 1",
			"UPDATE v_cols SET q = 5 WHERE k = '1'",
			"DELETE FROM v_sku WHERE id = 1",
			"SELECT qty FROM v_sku WHERE id = 1 FOR UPDATE",
		} {
			_, err := b.Exec(q)
			wantErr(t, err, 1205)
		}
		if _, err := b.Exec("UPDATE v_sku SET qty = qty WHERE id = 2"); err != nil {
			t.Fatalf("another row through the view: %v", err)
		}
		if got := stock(t, 1); got != 10 {
			t.Fatalf("row 1 changed to %d while locked", got)
		}
	})
	t.Run("a view lockproxy cannot key is refused", func(t *testing.T) {
		_, err := b.Exec("SELECT total FROM v_total WHERE sku_id = 1 FOR UPDATE")
		wantErr(t, err, 1105, "through view "+db+".v_total")
		_, err = b.Exec("UPDATE v_sku SET qty = 0")
		wantErr(t, err, 1105, "through view "+db+".v_sku")
	})
	t.Run("procedure", func(t *testing.T) {
		_, err := b.Exec("CALL p_zero()")
		wantErr(t, err, 1105, "procedure "+db+".p_zero", "allow_routines")
		if got := stock(t, 1); got != 10 {
			t.Fatalf("refused CALL ran: stock %d", got)
		}
	})
	t.Run("function", func(t *testing.T) {
		for _, q := range []string{"SELECT f_take(1)", "UPDATE orders SET n = f_take(1) WHERE id = 1", "DO " + db + ".f_take(1)"} {
			_, err := b.Exec(q)
			wantErr(t, err, 1105, "function "+db+".f_take")
		}
		if got := stock(t, 1); got != 10 {
			t.Fatalf("refused function ran: stock %d", got)
		}
	})
	t.Run("trigger", func(t *testing.T) {
		_, err := b.Exec("INSERT INTO orders VALUES (1, 1, 3)")
		wantErr(t, err, 1105, "trigger "+db+".trg_orders on "+db+".orders", "allow_triggers")
		if got := stock(t, 1); got != 10 {
			t.Fatalf("refused INSERT fired its trigger: stock %d", got)
		}
	})
	t.Run("allowed routine and trigger run", func(t *testing.T) {
		if _, err := b.Exec("CALL p_allowed()"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Exec("INSERT INTO returns VALUES (1, 2, 4)"); err != nil {
			t.Fatal(err)
		}
		if got := stock(t, 2); got != 15 {
			t.Fatalf("stock of row 2 is %d, want 15", got)
		}
	})
	t.Run("a BEFORE trigger that sets the key", func(t *testing.T) {
		direct := base.direct(t, db, "")
		testbed.MustExec(t, direct, "CREATE TRIGGER trg_key BEFORE INSERT ON sku FOR EACH ROW SET NEW.sku_id = NEW.sku_id + 1000")
		t.Cleanup(func() { testbed.MustExec(t, direct, "DROP TRIGGER trg_key") })
		p2 := guardedProxy(t, db, nil)
		// MariaDB would insert row 1003, which another session may hold.
		_, err := p2.db(t, db, "").Exec("INSERT INTO sku VALUES (3, 1)")
		wantErr(t, err, 1105, "trigger "+db+".trg_key on "+db+".sku", "NEW.sku_id", "allow_triggers")
		var n int
		if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE sku_id IN (3, 1003)").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the refused INSERT ran: %d rows (%v)", n, err)
		}
	})
	t.Run("a view made through lockproxy is learned", func(t *testing.T) {
		testbed.MustExec(t, b, "CREATE VIEW v_new AS SELECT sku_id, stock FROM sku")
		holdRow(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := b.Exec("UPDATE v_new SET stock = stock WHERE sku_id = 1")
			if err != nil {
				wantErr(t, err, 1205)
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("a write through the new view still runs without the row lock")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
