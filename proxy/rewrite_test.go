package proxy

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// rewriteBed is one proxy with a rewrite rule (no row locks) on a fresh
// sku table holding row 1 with the given stock, and an orders table.
type rewriteBed struct {
	p      *testProxy
	db     string
	via    *sql.DB // through the proxy
	direct *sql.DB // straight to the primary: a concurrent writer
}

func newRewriteBed(t *testing.T, rw rules.Rewrite, stock string) rewriteBed {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, buyer VARCHAR(20))",
		"INSERT INTO sku VALUES (1, "+stock+")")
	if rw.Scope == "" {
		rw.Scope = rules.ScopeTransaction
	}
	p := startProxy(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "stock", Table: db + ".sku", Key: []string{"sku_id"}, Lock: []string{}, Rewrite: &rw}}
	})
	return rewriteBed{p: p, db: db, via: p.db(t, db, ""), direct: direct}
}

func (b rewriteBed) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := b.direct.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// buyInTxn is code that ignores affected rows: BEGIN, insert an order,
// read the stock, write back newStock(read), COMMIT. It returns the
// UPDATE's error or affected rows.
func buyInTxn(t *testing.T, b rewriteBed, prepared bool, between func(), newStock func(int) int) (int64, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.via.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("INSERT INTO orders (buyer) VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	var stock int
	if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	between()
	var res sql.Result
	if prepared {
		res, err = tx.Exec("UPDATE sku SET stock = ? WHERE sku_id = ?", newStock(stock), 1)
	} else {
		res, err = tx.Exec("UPDATE sku SET stock = " + strconv.Itoa(newStock(stock)) + " WHERE sku_id = 1")
	}
	if err != nil {
		_ = tx.Commit() // code that goes on regardless: nothing may commit
		return 0, err
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return n, nil
}

// wantRaceError checks err is the documented lost-race error.
func wantRaceError(t *testing.T, err error, code uint16, state string) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("want MySQL error %d, got %v", code, err)
	}
	if me.Number != code || string(me.SQLState[:]) != state ||
		!strings.HasPrefix(me.Message, "lockproxy: ") || !strings.Contains(me.Message, `rule "stock" key "`) ||
		!strings.Contains(me.Message, "transaction rolled back") {
		t.Errorf("got %d (%s) %q, want %d (%s) from lockproxy naming rule and key", me.Number, me.SQLState, me.Message, code, state)
	}
}

// TestRewriteLostRace: a guarded UPDATE whose guard held answers the
// documented error and rolls the transaction back (so code that ignores
// affected rows commits nothing), or 0 rows with on_conflict: zero_rows;
// a missing row or a write of the value already there is no race.
func TestRewriteLostRace(t *testing.T) {
	zero := 0.0
	minus1 := func(n int) int { return n - 1 }
	for _, prepared := range []bool{false, true} {
		form := map[bool]string{false: "text", true: "prepared"}[prepared]
		t.Run(form+"/cas value moved: 1213", func(t *testing.T) {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "cas"}, "10")
			_, err := buyInTxn(t, b, prepared, func() { testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1") }, minus1)
			wantRaceError(t, err, 1213, "40001")
			if n := b.count(t, "SELECT COUNT(*) FROM orders"); n != 0 {
				t.Errorf("the order of the lost race committed (%d rows)", n)
			}
			if n := b.count(t, "SELECT stock FROM sku"); n != 5 {
				t.Errorf("stock %d, want 5 (the winner's write)", n)
			}
			wantValues(t, b.p.reg, "lockproxy_rewrites_total", map[string]float64{
				"mode=cas,result=applied,rule=stock": 0, "mode=cas,result=conflicted,rule=stock": 1,
				"mode=cas,result=skipped,rule=stock": 0, "mode=cas,result=unpaired,rule=stock": 0,
			})
		})
		t.Run(form+"/delta below min: 4025", func(t *testing.T) {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", Min: &zero}, "1")
			_, err := buyInTxn(t, b, prepared, func() { testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 0 WHERE sku_id = 1") }, minus1)
			wantRaceError(t, err, 4025, "23000")
			if n := b.count(t, "SELECT COUNT(*) FROM orders"); n != 0 {
				t.Errorf("the order of the lost race committed (%d rows)", n)
			}
			if n := b.count(t, "SELECT stock FROM sku"); n != 0 {
				t.Errorf("stock %d, want 0", n)
			}
		})
	}
	t.Run("delta moved but above min: applied", func(t *testing.T) {
		b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", Min: &zero}, "10")
		n, err := buyInTxn(t, b, false, func() { testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1") }, minus1)
		if err != nil || n != 1 {
			t.Fatalf("got %d rows, %v", n, err)
		}
		if s := b.count(t, "SELECT stock FROM sku"); s != 4 {
			t.Errorf("stock %d, want 4: the delta is applied to the moved value", s)
		}
	})
	t.Run("zero_rows", func(t *testing.T) {
		b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "cas", OnConflict: rules.OnConflictZeroRows}, "10")
		n, err := buyInTxn(t, b, false, func() { testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1") }, minus1)
		if err != nil || n != 0 {
			t.Fatalf("got %d rows, %v; want 0 rows and no error", n, err)
		}
		if c := b.count(t, "SELECT COUNT(*) FROM orders"); c != 1 {
			t.Errorf("orders %d: zero_rows must leave the transaction to the application", c)
		}
	})
	t.Run("no race", func(t *testing.T) {
		for _, mode := range []string{"cas", "delta"} {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: mode, Min: &zero}, "10")
			// The value already there: matched, not changed, not a race.
			if n, err := buyInTxn(t, b, false, func() {}, func(n int) int { return n }); err != nil || n != 0 {
				t.Errorf("%s: same value: %d rows, %v", mode, n, err)
			}
			// A missing row (relative update, guarded by min): 0 rows.
			res, err := b.via.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 99")
			if err != nil {
				t.Fatalf("%s: missing row: %v", mode, err)
			}
			if n, _ := res.RowsAffected(); n != 0 {
				t.Errorf("%s: missing row: %d rows", mode, n)
			}
			if c := b.count(t, "SELECT COUNT(*) FROM orders"); c != 1 {
				t.Errorf("%s: orders %d, want 1", mode, c)
			}
		}
	})
}

// TestRewriteScope: with scope transaction a value read is paired only
// with writes of the same transaction; session keeps it across
// autocommit statements on one connection.
func TestRewriteScope(t *testing.T) {
	ctx := context.Background()
	readThenWrite := func(t *testing.T, conn *sql.Conn, b rewriteBed, begin, commitBetween bool) {
		t.Helper()
		if begin {
			mustConnExec(t, conn, "BEGIN")
		}
		var stock int
		if err := conn.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
			t.Fatal(err)
		}
		if commitBetween {
			mustConnExec(t, conn, "COMMIT", "BEGIN")
		}
		testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1")
		mustConnExec(t, conn, "UPDATE sku SET stock = 9 WHERE sku_id = 1")
		if begin {
			mustConnExec(t, conn, "COMMIT")
		}
	}
	for _, c := range []struct {
		name                 string
		scope                string
		begin, commitBetween bool
		stock                int // 9: written as sent (unpaired); 4: rewritten (10 -> 9 on top of 5)
		result               string
	}{
		{"transaction/autocommit", rules.ScopeTransaction, false, false, 9, "unpaired"},
		{"transaction/in txn", rules.ScopeTransaction, true, false, 4, "applied"},
		{"transaction/commit between", rules.ScopeTransaction, true, true, 9, "unpaired"},
		{"session/autocommit", rules.ScopeSession, false, false, 4, "applied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", Scope: c.scope}, "10")
			conn, err := b.via.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			readThenWrite(t, conn, b, c.begin, c.commitBetween)
			if s := b.count(t, "SELECT stock FROM sku"); s != c.stock {
				t.Errorf("stock %d, want %d", s, c.stock)
			}
			if v := value(t, b.p.reg, "lockproxy_rewrites_total", "mode=delta,result="+c.result+",rule=stock"); v != 1 {
				t.Errorf("lockproxy_rewrites_total{result=%q} = %v, want 1", c.result, v)
			}
		})
	}
	t.Run("on_unpaired reject", func(t *testing.T) {
		b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", OnUnpaired: rules.OnUnpairedReject}, "10")
		_, err := b.via.Exec("UPDATE sku SET stock = 3 WHERE sku_id = 1")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy: ") ||
			!strings.Contains(me.Message, `rule "stock" key "`) || !strings.Contains(me.Message, "on_unpaired") {
			t.Fatalf("got %v, want 1105 from lockproxy naming rule, key and on_unpaired", err)
		}
		if s := b.count(t, "SELECT stock FROM sku"); s != 10 {
			t.Errorf("the refused write ran: stock %d", s)
		}
		// Relative writes and paired writes still run.
		testbed.MustExec(t, b.via, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
		if n, err := buyInTxn(t, b, true, func() {}, func(n int) int { return n - 1 }); err != nil || n != 1 {
			t.Fatalf("paired write: %d rows, %v", n, err)
		}
		if s := b.count(t, "SELECT stock FROM sku"); s != 8 {
			t.Errorf("stock %d, want 8", s)
		}
		if v := value(t, b.p.reg, "lockproxy_statements_rejected_total", "reason=unpaired,rule=stock"); v != 1 {
			t.Errorf("lockproxy_statements_rejected_total{reason=unpaired} = %v, want 1", v)
		}
	})
}

// TestRewriteLostRaceFenced: on a rule that also fences its locked
// UPDATEs, a guarded UPDATE that lost its race (not to a newer lock
// holder) is still the rewrite's documented error, after the fence check.
func TestRewriteLostRaceFenced(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)",
		"CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, buyer VARCHAR(20))",
		"INSERT INTO sku (sku_id, stock) VALUES (1, 10)")
	p := guardedProxy(t, db, func(r *rules.Rule) {
		r.Fence = "fence"
		r.Rewrite = &rules.Rewrite{Column: "stock", Mode: "cas", Scope: rules.ScopeTransaction}
		// No read_in_txn: the read is a plain snapshot read, so a writer
		// that bypasses lockproxy can change the row before the UPDATE
		// (a locked read is a current read, whose InnoDB share lock
		// would hold that writer until the transaction ends).
		r.Lock = []string{rules.LockWrite, rules.LockLockingRead}
	})
	b := rewriteBed{p: p, via: p.db(t, db, ""), direct: direct}
	// The concurrent writer bypasses lockproxy, as an unguarded path
	// would.
	_, err := buyInTxn(t, b, false, func() { testbed.MustExec(t, direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1") }, func(n int) int { return n - 1 })
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 || !strings.Contains(me.Message, "changed after it was read") {
		t.Fatalf("got %v, want the rewrite's 1213", err)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM orders"); n != 0 {
		t.Errorf("the order of the lost race committed (%d rows)", n)
	}
	if v := value(t, p.reg, "lockproxy_fenced_writes_total", "rule=sku-stock"); v != 0 {
		t.Errorf("counted as fenced: %v", v)
	}
}

// TestRewriteForgetsWhatOtherStatementsShow: a remembered value is
// forgotten when the session runs anything else that may show or change
// the row: a read the capture cannot use, a read of several rows or a
// range, a join, a multi-row UPDATE, text it cannot parse. The next
// absolute write is then unpaired and runs as sent; pairing it with the
// old value would have written the difference from a value the
// application no longer believes.
func TestRewriteForgetsWhatOtherStatementsShow(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, setup, between string }{
		{"column twice", "", "SELECT stock, stock FROM sku WHERE sku_id = 1"},
		{"NULL for the column", "", "SELECT IF(stock = 5, NULL, stock) AS stock FROM sku WHERE sku_id = 1"},
		{"expression named as the column", "", "SELECT stock - 0 AS stock FROM sku WHERE sku_id = 1"},
		{"several rows", "", "SELECT stock FROM sku WHERE sku_id IN (1, 2)"},
		{"range", "", "SELECT stock FROM sku WHERE sku_id >= 1"},
		{"join", "", "SELECT s.stock FROM sku s JOIN sku t ON t.sku_id = s.sku_id WHERE s.sku_id = 1"},
		{"multi-row UPDATE", "", "UPDATE sku SET stock = stock WHERE sku_id IN (1, 2)"},
		{"unparsed", "", "SELECT stock FROM sku WHERE sku_id = 1 PROCEDURE ANALYSE()"},
		{"view", "CREATE VIEW v AS SELECT sku_id, stock FROM sku", "SELECT stock FROM v WHERE sku_id = 1"},
		{"stored function", "CREATE FUNCTION f_stock(id BIGINT) RETURNS INT READS SQL DATA RETURN (SELECT stock FROM sku WHERE sku_id = id)",
			"SELECT f_stock(1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", Scope: rules.ScopeSession}, "10")
			if c.setup != "" {
				testbed.MustExec(t, b.via, c.setup) // through lockproxy: it reads the schema again
			}
			conn, err := b.via.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var stock int
			if err := conn.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil || stock != 10 {
				t.Fatalf("first read: %d, %v", stock, err)
			}
			testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1")
			rows, err := conn.QueryContext(ctx, c.between)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
			if err != nil {
				t.Logf("%s: %v", c.between, err)
			}
			// The application now believes 5 and takes one.
			mustConnExec(t, conn, "UPDATE sku SET stock = 4 WHERE sku_id = 1")
			if s := b.count(t, "SELECT stock FROM sku"); s != 4 {
				t.Errorf("stock %d, want 4 (written as sent; paired with the first read it becomes 5 + (4 - 10))", s)
			}
			if v := value(t, b.p.reg, "lockproxy_rewrites_total", "mode=delta,result=unpaired,rule=stock"); v != 1 {
				t.Errorf("lockproxy_rewrites_total{result=unpaired} = %v, want 1", v)
			}
		})
	}
}

// TestUnpairedRejectCoversEveryWrite: with rewrite.on_unpaired: reject
// (here on a rule that takes no row locks, where the rewrite is the only
// guarantee) every statement that may set the guarded column to a value
// lockproxy does not make conditional is refused with 1105 naming the
// rule, and does not run: whatever its form, through a view, through
// dynamic SQL, or as text lockproxy cannot read with certainty. Relative
// writes, new rows and reads still run; with on_unpaired: allow the same
// statements run as sent.
func TestUnpairedRejectCoversEveryWrite(t *testing.T) {
	refused := []string{
		"UPDATE sku SET stock = 9 WHERE sku_id = 1",
		"UPDATE v SET stock = 9 WHERE sku_id = 1",
		"UPDATE v2 SET s = 9 WHERE id = 1",
		"UPDATE sku SET stock = 9 WHERE sku_id IN (1, 2)",
		"UPDATE sku SET stock = 9 WHERE sku_id >= 1",
		"UPDATE sku SET stock = 9 - 0 WHERE sku_id = 1",
		"UPDATE sku SET stock = (SELECT 9) WHERE sku_id = 1",
		"UPDATE sku s JOIN orders o ON o.id = s.sku_id SET s.stock = 9",
		"INSERT INTO sku VALUES (1, 9) ON DUPLICATE KEY UPDATE stock = 9",
		"INSERT INTO sku VALUES (1, 9) ON DUPLICATE KEY UPDATE stock = VALUES(stock)",
		"REPLACE INTO sku VALUES (1, 9)",
		"/*M!100000 UPDATE sku SET stock = 9 */",
		"UPDATE sku SET stock = 9 WHERE sku_id = 1 OR sku_id = " + strings.Repeat("9", 90), // MariaDB runs it; the parser cannot read it
		"EXECUTE upd",
		"EXECUTE unseen",
	}
	allowed := []string{
		"UPDATE sku SET stock = stock - 1 WHERE sku_id = 1",
		"UPDATE sku SET stock = stock - 1 WHERE sku_id IN (1, 2)",
		"INSERT INTO sku VALUES (3, 10)",
		"SELECT stock FROM sku WHERE sku_id >= 1",
		"SELECT stock FROM v WHERE sku_id = 1",
		"UPDATE v2 SET s = s - 1 WHERE id = 1",
	}
	for _, mode := range []string{rules.OnUnpairedReject, rules.OnUnpairedAllow} {
		t.Run(mode, func(t *testing.T) {
			b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", OnUnpaired: mode}, "10")
			testbed.MustExec(t, b.direct, "INSERT INTO sku VALUES (2, 10)", "INSERT INTO orders VALUES (1, 'a')")
			testbed.MustExec(t, b.via, "CREATE VIEW v AS SELECT sku_id, stock FROM sku", "CREATE VIEW v2 AS SELECT sku_id AS id, stock AS s FROM sku")
			ctx := context.Background()
			conn, err := b.via.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			mustConnExec(t, conn, "PREPARE upd FROM 'UPDATE sku SET stock = 9 WHERE sku_id = 1'",
				"SET @q = CONCAT('UPDATE sku SET stock = 9 ', 'WHERE sku_id = 1')")
			// A text lockproxy cannot see is refused when prepared, and
			// its EXECUTE too (lockproxy did not see it prepared).
			if _, err := conn.ExecContext(ctx, "PREPARE unseen FROM @q"); (err != nil) != (mode == rules.OnUnpairedReject) {
				t.Errorf("PREPARE unseen FROM @q: %v", err)
			}
			for _, q := range refused {
				testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 10")
				_, err := conn.ExecContext(ctx, q)
				changed := b.count(t, "SELECT COUNT(*) FROM sku WHERE stock <> 10")
				if mode == rules.OnUnpairedAllow {
					if err != nil || changed == 0 {
						t.Errorf("%s with on_unpaired: allow: %v, %d rows changed; want it run", q, err, changed)
					}
					continue
				}
				var me *mysql.MySQLError
				if !errors.As(err, &me) || me.Number != 1105 || !strings.HasPrefix(me.Message, `lockproxy: rule "stock"`) ||
					!strings.Contains(me.Message, "on_unpaired: reject") {
					t.Errorf("%s: %v; want lockproxy's 1105 naming the rule and on_unpaired", q, err)
				}
				if changed != 0 {
					t.Errorf("%s was refused but changed %d rows", q, changed)
				}
			}
			for _, q := range allowed {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Errorf("%s: %v; want it run", q, err)
				}
			}
			if mode == rules.OnUnpairedReject {
				if v := value(t, b.p.reg, "lockproxy_statements_rejected_total", "reason=unpaired,rule=stock"); v != float64(len(refused)+1) {
					t.Errorf("lockproxy_statements_rejected_total{reason=unpaired} = %v, want %d", v, len(refused)+1)
				}
			}
		})
	}
}

// TestRewriteForgetsRowsAFunctionShows: a keyed read of one row that also
// calls a stored function may show the application other rows (here the
// function reads row 2): their remembered values are forgotten, and the
// next absolute write of row 2 is unpaired.
func TestRewriteForgetsRowsAFunctionShows(t *testing.T) {
	ctx := context.Background()
	b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", Scope: rules.ScopeSession}, "10")
	testbed.MustExec(t, b.direct, "INSERT INTO sku VALUES (2, 10)")
	testbed.MustExec(t, b.via, "CREATE FUNCTION f_stock(id BIGINT) RETURNS INT READS SQL DATA RETURN (SELECT stock FROM sku WHERE sku_id = id)")
	conn, err := b.via.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var one, two int
	if err := conn.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 2").Scan(&two); err != nil || two != 10 {
		t.Fatalf("first read of row 2: %d, %v", two, err)
	}
	testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 2")
	if err := conn.QueryRowContext(ctx, "SELECT stock, f_stock(2) FROM sku WHERE sku_id = 1").Scan(&one, &two); err != nil || two != 5 {
		t.Fatalf("read of row 1 showing row 2: %d, %d, %v", one, two, err)
	}
	// The application now believes row 2 holds 5 and takes one.
	mustConnExec(t, conn, "UPDATE sku SET stock = 4 WHERE sku_id = 2")
	if s := b.count(t, "SELECT stock FROM sku WHERE sku_id = 2"); s != 4 {
		t.Errorf("row 2: stock %d, want 4 (written as sent; paired with the first read it becomes 5 + (4 - 10))", s)
	}
}

// TestUnpairedRejectLongData: under rewrite.on_unpaired: reject, a
// prepared absolute UPDATE whose value went by COM_STMT_SEND_LONG_DATA
// (never rewritten) is refused with 1105 naming the rule and does not
// run; the next execute, paired with a read, runs with its own values.
func TestUnpairedRejectLongData(t *testing.T) {
	b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "delta", OnUnpaired: rules.OnUnpairedReject}, "10")
	r := dialRaw(t, b.p.addr, b.p.bed.User, b.p.bed.Password, b.db, false)
	id, _ := r.prepare("UPDATE sku SET stock = ? WHERE sku_id = ?")
	r.send(stmtPayload(gmysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, "9"...)...)...)
	_, _, err := r.execute(id, true, longData{}, int64(1))
	wantError(t, "absolute write by long data", err, 1105, true)
	if s := b.count(t, "SELECT stock FROM sku"); s != 10 {
		t.Fatalf("the refused write ran: stock %d", s)
	}
	if v := value(t, b.p.reg, "lockproxy_statements_rejected_total", "reason=unpaired,rule=stock"); v != 1 {
		t.Errorf("lockproxy_statements_rejected_total{reason=unpaired} = %v, want 1", v)
	}
	// Read, then write with plain parameters: paired and rewritten, with
	// the values of this execute (no long data left bound).
	if _, err := r.query("BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.query("SELECT stock FROM sku WHERE sku_id = 1"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := r.execute(id, true, int64(7), int64(1)); err != nil || ok == nil || ok.AffectedRows != 1 {
		t.Fatalf("paired execute: %v %v", ok, err)
	}
	if _, err := r.query("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if s := b.count(t, "SELECT stock FROM sku"); s != 7 {
		t.Errorf("stock %d, want 7", s)
	}
}

// TestRewriteCheckWarnings: when a guarded UPDATE changed nothing and
// warned, the rewrite's check (a read of the row on the same connection)
// replaces its warnings there: SHOW WARNINGS or @@warning_count next is
// refused with lockproxy's 1105, also after a statement that keeps the
// area (SET @x) or a COM_PING, never answered with the check's empty
// area, where MariaDB shows the UPDATE's warning. One that changed the
// row (no check) shows its warnings as directly.
func TestRewriteCheckWarnings(t *testing.T) {
	b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: "cas"}, "2147483647")
	ctx := context.Background()
	warnings := func(c *sql.Conn) ([]string, error) {
		rows, err := c.QueryContext(ctx, "SHOW WARNINGS")
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var level, msg string
			var code int
			if err := rows.Scan(&level, &code, &msg); err != nil {
				t.Fatal(err)
			}
			got = append(got, msg)
		}
		return got, rows.Err()
	}
	run := func(pool *sql.DB, between string) (affected int64, got []string, err error) {
		c, cerr := pool.Conn(ctx)
		if cerr != nil {
			t.Fatal(cerr)
		}
		defer c.Close()
		defer c.ExecContext(ctx, "ROLLBACK")
		for _, q := range []string{"SET SESSION sql_mode = ''", "BEGIN", "SELECT stock FROM sku WHERE sku_id = 1"} {
			rows, qerr := c.QueryContext(ctx, q)
			if qerr != nil {
				t.Fatal(q, qerr)
			}
			rows.Close()
		}
		// Out of range: stored as the INT's maximum, the value already there.
		res, uerr := c.ExecContext(ctx, "UPDATE sku SET stock = 99999999999 WHERE sku_id = 1")
		if uerr != nil {
			t.Fatal(uerr)
		}
		affected, _ = res.RowsAffected()
		switch between {
		case "set":
			if _, err := c.ExecContext(ctx, "SET @x = 1"); err != nil {
				t.Fatal(err)
			}
		case "ping":
			if err := c.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got, err = warnings(c)
		return affected, got, err
	}
	for _, between := range []string{"", "set", "ping"} {
		n, direct, err := run(b.direct, between)
		if err != nil || n != 0 || len(direct) != 1 {
			t.Fatalf("directly: %d rows, warnings %v, %v; want 0 rows and the out-of-range warning", n, direct, err)
		}
		n, got, err := run(b.via, between)
		var me *mysql.MySQLError
		if n != 0 || !errors.As(err, &me) || me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy: ") ||
			!strings.Contains(me.Message, "lost") {
			t.Errorf("after %q: %d rows, SHOW WARNINGS %v, %v; want lockproxy's 1105 (directly: %v)", between, n, got, err, direct)
		}
	}
	if v := value(t, b.p.reg, "lockproxy_rewrites_total", "mode=cas,result=applied,rule=stock"); v == 0 {
		t.Error("the UPDATE was not rewritten: the check never ran")
	}
	// A write that changed the row runs no check: its warnings stay.
	testbed.MustExec(t, b.direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1")
	c, err := b.via.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"SET SESSION sql_mode = ''", "BEGIN", "SELECT stock FROM sku WHERE sku_id = 1",
		"UPDATE sku SET stock = 99999999999 WHERE sku_id = 1"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	if got, err := warnings(c); err != nil || len(got) != 1 {
		t.Errorf("after an UPDATE that changed the row: SHOW WARNINGS %v, %v; want its one warning", got, err)
	}
	_, _ = c.ExecContext(ctx, "ROLLBACK")
}
