package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// shapeBed is the shape tests' table, sku with rows 0, 7 and 1001 at
// stock 10, behind a proxy whose sku-stock rule guards it: the proxy, a
// handle straight to the primary and two through the proxy.
func shapeBed(t *testing.T) (p *testProxy, direct, a, b *sql.DB) {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct = base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (0, 10), (7, 10), (1001, 10)")
	p = guardedProxy(t, db, nil)
	return p, direct, p.db(t, db, ""), p.db(t, db, "")
}

// holdRow begins a transaction on h that writes sku row id, so it holds
// the row's lock until the transaction ends (a rollback at the test's
// end, or the caller's).
func holdRow(t *testing.T, h *sql.DB, id int) *sql.Tx {
	t.Helper()
	tx, err := h.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.Exec(fmt.Sprintf("UPDATE sku SET stock = stock WHERE sku_id = %d", id)); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestTextShapesLockTheirOwnRows: text UPDATEs that differ only in their
// numbers are analysed once by their shape, and each still takes the lock
// of the row it names: with row 1001 held, the UPDATE of row 1001 waits
// and times out although its shape was first seen naming row 0. Texts
// whose shape would not key every row are planned from their own text, so
// a refusal quotes the text's literal, not a placeholder.
func TestTextShapesLockTheirOwnRows(t *testing.T) {
	p, direct, a, b := shapeBed(t)
	stock := func(id int) int { return skuStock(t, direct, id) }

	if _, err := a.Exec("UPDATE sku SET stock = 5 WHERE sku_id = 0"); err != nil {
		t.Fatal(err)
	}
	shaped := p.srv.analyzer.Shaped()
	if _, err := a.Exec("UPDATE sku SET stock = 6 WHERE sku_id = 7"); err != nil {
		t.Fatal(err)
	}
	if got := p.srv.analyzer.Shaped(); got != shaped+1 {
		t.Fatalf("the second UPDATE of the shape was not answered by it: shaped %d -> %d", shaped, got)
	}
	if stock(0) != 5 || stock(7) != 6 {
		t.Fatalf("stocks %d, %d; want 5, 6", stock(0), stock(7))
	}

	tx := holdRow(t, b, 1001)
	_, err := a.Exec("UPDATE sku SET stock = 1 WHERE sku_id = 1001")
	if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
		t.Fatalf("while row 1001 is held: want lockproxy's 1205 naming the rule, got %v", me)
	}
	if stock(1001) != 10 {
		t.Fatal("the UPDATE ran while its row was held")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec("UPDATE sku SET stock = 1 WHERE sku_id = 1001"); err != nil {
		t.Fatal(err)
	}
	if stock(1001) != 1 {
		t.Fatalf("stock of 1001 = %d, want 1", stock(1001))
	}

	// Not keyed from the shape: planned from the text, refused as before.
	before := p.srv.analyzer.Shaped()
	for _, q := range []string{"UPDATE sku SET stock = 2 WHERE sku_id = 7 OR stock = 3", "UPDATE sku SET stock = 2 WHERE sku_id = 7 OR stock = 4"} {
		_, err = a.Exec(q)
		if me := mysqlErr(t, err); me.Number != 1105 || !strings.Contains(me.Message, "sku-stock") || strings.Contains(me.Message, "parameter") {
			t.Fatalf("%s: want lockproxy's 1105 from the text's own plan, got %v", q, me)
		}
	}
	if p.srv.analyzer.Shaped() != before+1 {
		t.Fatalf("the second unkeyed text should have been shaped, then planned again from its text")
	}
	if stock(7) != 6 {
		t.Fatal("a refused UPDATE ran")
	}
}

// TestTextShapesOfInsertRows: text INSERTs whose VALUES rows differ only
// in their numbers and plain strings share a shape (sysbench's
// oltp_read_write sends one per transaction, each with new values), and
// each still takes the lock of every row it inserts: with row 1001 held,
// an INSERT of row 1001 of a shape first seen naming other rows (one row;
// two rows, 1001 the second; the key as a string) waits for its lock and
// times out, where a lockless INSERT would have reached MariaDB and failed
// on the duplicate key.
func TestTextShapesOfInsertRows(t *testing.T) {
	p, direct, a, b := shapeBed(t)
	for _, q := range []string{
		"INSERT INTO sku VALUES (2, 10)", "INSERT INTO sku VALUES (3, '9')",
		"INSERT INTO sku (sku_id, stock) VALUES (4, 1), (5, 1)",
	} {
		if _, err := a.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	holdRow(t, b, 1001)
	// exec runs q through a and reports whether its shape answered it.
	exec := func(q string) (shaped bool, err error) {
		before := p.srv.analyzer.Shaped()
		_, err = a.Exec(q)
		return p.srv.analyzer.Shaped() == before+1, err
	}
	for _, q := range []string{
		"INSERT INTO sku VALUES (1001, 1)", "INSERT INTO sku VALUES ('1001', 1)",
		"INSERT INTO sku (sku_id, stock) VALUES (6, 1), (1001, 1)",
	} {
		shaped, err := exec(q)
		if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("%s while row 1001 is held: want lockproxy's 1205 naming the rule, got %v", q, me)
		}
		if !shaped {
			t.Fatalf("%s: not answered by the shape of the INSERTs before it", q)
		}
	}
	// 1001 as the stock, not the key: row 6 is inserted, by the shape.
	if shaped, err := exec("INSERT INTO sku VALUES (6, '1001')"); err != nil || !shaped {
		t.Fatalf("INSERT of row 6 with stock 1001: %v (shaped %v); want it inserted, by its shape", err, shaped)
	}
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE sku_id IN (2, 3, 4, 5, 6)").Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows inserted: %d (%v), want 5", n, err)
	}
}

// TestTextShapesOfRanges: range texts (BETWEEN with two integer bounds)
// share a shape, and a range of one row, BETWEEN k AND k, which MariaDB
// reads as = k, still locks its row after the range texts established
// the shape: with row 1001 held, the UPDATE and the locking read naming
// BETWEEN 1001 AND 1001 wait for its lock and time out. (Two things hold
// this: the parser never shapes equal bounds, and a plan from a shape
// that is refused is made again from the text.) A range on a guarded
// table keys no row; it is refused from its own text, as before.
func TestTextShapesOfRanges(t *testing.T) {
	p, direct, a, b := shapeBed(t)
	ctx := context.Background()

	shaped := p.srv.analyzer.Shaped()
	for _, q := range []string{"UPDATE sku SET stock = 2 WHERE sku_id BETWEEN 0 AND 7", "UPDATE sku SET stock = 2 WHERE sku_id BETWEEN 1 AND 7"} {
		_, err := a.Exec(q)
		if me := mysqlErr(t, err); me.Number != 1105 || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("%s: want lockproxy's 1105 (a range keys no row), got %v", q, me)
		}
	}
	if got := p.srv.analyzer.Shaped(); got != shaped+1 {
		t.Fatalf("the second range was not answered by the first one's shape: shaped %d -> %d", shaped, got)
	}
	if skuStock(t, direct, 0) != 10 || skuStock(t, direct, 7) != 10 {
		t.Fatal("a refused range UPDATE ran")
	}

	holdRow(t, b, 1001)
	_, err := a.Exec("UPDATE sku SET stock = 1 WHERE sku_id BETWEEN 1001 AND 1001")
	if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("BETWEEN 1001 AND 1001 while row 1001 is held: want lockproxy's 1205, got %v", me)
	}
	rtx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rtx.Exec("SELECT stock FROM sku WHERE sku_id BETWEEN 1001 AND 1001 FOR UPDATE")
	if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("a locking read of BETWEEN 1001 AND 1001 while row 1001 is held: want lockproxy's 1205, got %v", me)
	}
	_ = rtx.Rollback()
	if skuStock(t, direct, 1001) != 10 {
		t.Fatal("the UPDATE ran while its row was held")
	}
}

// TestTextShapesOfRangeReads: plain range reads in a transaction under
// read_in_txn (sysbench's oltp_read_write sends four in every
// transaction) run without row locks (on_unkeyed_read: allow) and are
// answered by their shape, not parsed again text by text: the parser's
// cache holds no new text for them and each is counted and audited as an
// unkeyed read. A read of BETWEEN 1001 AND 1001, one row, is still keyed
// from its own text (equal bounds are never shaped): with row 1001 held
// it waits for the lock and times out.
func TestTextShapesOfRangeReads(t *testing.T) {
	p, _, a, b := shapeBed(t)
	ctx := context.Background()
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	count := func(q string) int {
		t.Helper()
		var n int
		if err := tx.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM sku WHERE sku_id BETWEEN 0 AND 7"); n != 2 {
		t.Fatalf("rows 0..7: %d, want 2", n)
	}
	shaped, texts := p.srv.analyzer.Shaped(), p.srv.analyzer.Len()
	reads := testutil.ToFloat64(p.srv.metrics.unkeyedReads.WithLabelValues("sku-stock"))
	for _, c := range []struct {
		lo, hi, want int
	}{{1, 7, 1}, {0, 1001, 3}, {8, 1000, 0}, {7, 1001, 2}} {
		if n := count(fmt.Sprintf("SELECT COUNT(*) FROM sku WHERE sku_id BETWEEN %d AND %d", c.lo, c.hi)); n != c.want {
			t.Fatalf("rows %d..%d: %d, want %d", c.lo, c.hi, n, c.want)
		}
	}
	if got := p.srv.analyzer.Shaped(); got != shaped+4 {
		t.Fatalf("the range reads were not answered by their shape: shaped %d -> %d", shaped, got)
	}
	if got := p.srv.analyzer.Len(); got != texts {
		t.Fatalf("range reads answered by their shape were analysed again from their texts: %d cached texts -> %d", texts, got)
	}
	if got := testutil.ToFloat64(p.srv.metrics.unkeyedReads.WithLabelValues("sku-stock")); got != reads+4 {
		t.Fatalf("unkeyed reads counted %v -> %v, want 4 more", reads, got)
	}

	holdRow(t, b, 1001)
	_, err = tx.Exec("SELECT stock FROM sku WHERE sku_id BETWEEN 1001 AND 1001")
	if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("a read of BETWEEN 1001 AND 1001 in a transaction while row 1001 is held: want lockproxy's 1205, got %v", me)
	}
}

// TestTextShapesOfStringKeys: text UPDATEs that differ only in a string
// key are analysed once by their shape too, and each takes the lock of the
// row MariaDB would change: with row 'C-1001' held (by a prepared read in
// a transaction: lockproxy's lock only, none in InnoDB), the UPDATEs naming
// 'C-1001', 'c-1001' and 'C-1001  ' (the same row under the column's case-
// insensitive, PAD SPACE collation, as MariaDB itself confirms) all wait
// and time out, each answered by the shape first seen naming 'A-0'; and
// with row 'D\' held, the UPDATE naming it as 'D\\' (an escape) waits
// too, planned from its own text.
func TestTextShapesOfStringKeys(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id VARCHAR(32) PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES ('A-0', 10), ('B-7', 10), ('C-1001', 10), ('D\\\\', 10)")
	p := guardedProxy(t, db, nil)
	a, b := p.db(t, db, ""), p.db(t, db, "")
	ctx := context.Background()
	stock := func(id string) int {
		t.Helper()
		var n int
		if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	variants := []string{"C-1001", "c-1001", "C-1001  "}
	for _, v := range variants {
		var n int
		if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE sku_id = '" + v + "'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("MariaDB: %q names %d rows (%v); the test wants one", v, n, err)
		}
	}

	if _, err := a.Exec("UPDATE sku SET stock = 5 WHERE sku_id = 'A-0'"); err != nil {
		t.Fatal(err)
	}
	shaped := p.srv.analyzer.Shaped()
	if _, err := a.Exec("UPDATE sku SET stock = 6 WHERE sku_id = 'B-7'"); err != nil {
		t.Fatal(err)
	}
	if got := p.srv.analyzer.Shaped(); got != shaped+1 {
		t.Fatalf("the second UPDATE of the shape was not answered by it: shaped %d -> %d", shaped, got)
	}
	if stock("A-0") != 5 || stock("B-7") != 6 {
		t.Fatalf("stocks %d, %d; want 5, 6", stock("A-0"), stock("B-7"))
	}

	tx, err := b.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, held := range []string{"C-1001", "D\\"} {
		// A prepared read: its key comes from the bound value, not from
		// any text lockproxy shapes.
		var n int
		if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", held).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range append(variants, "D\\\\") {
		before := p.srv.analyzer.Shaped()
		_, err = a.Exec("UPDATE sku SET stock = 1 WHERE sku_id = '" + v + "'")
		if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("%q while row C-1001 is held: want lockproxy's 1205 naming the rule, got %v", v, me)
		}
		if shaped := p.srv.analyzer.Shaped() == before+1; shaped == strings.Contains(v, "\\") {
			t.Fatalf("%q: answered by the shape: %v; want it only for a plain string", v, shaped)
		}
	}
	if stock("C-1001") != 10 || stock("D\\") != 10 {
		t.Fatal("an UPDATE ran while its row was held")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec("UPDATE sku SET stock = 1 WHERE sku_id = 'c-1001'"); err != nil {
		t.Fatal(err)
	}
	if stock("C-1001") != 1 {
		t.Fatalf("stock of C-1001 = %d, want 1", stock("C-1001"))
	}
}

// TestTextShapesOfRewrittenUpdates: an UPDATE of a rewrite rule's table is
// rewritten from its own text (the rewrite needs its parse tree), and
// after the first one its shape is remembered as needing the text, so the
// next ones are not planned twice; each is still rewritten with its own
// value, so a concurrent write between the read and the write is kept.
func TestTextShapesOfRewrittenUpdates(t *testing.T) {
	b := newRewriteBed(t, rules.Rewrite{Column: "stock", Mode: rules.RewriteDelta}, "10")
	for i, want := range []int{9, 8} {
		if n, err := buyInTxn(t, b, false, func() {}, func(s int) int { return s - 1 }); err != nil || n != 1 {
			t.Fatalf("buy %d: %d rows, %v", i, n, err)
		}
		if got := b.count(t, "SELECT stock FROM sku WHERE sku_id = 1"); got != want {
			t.Fatalf("after buy %d: stock %d, want %d", i, got, want)
		}
	}
	if b.p.srv.textShapes.Len() == 0 {
		t.Fatal("the rewritten UPDATE's shape was not remembered as needing its text")
	}
	// Another writer between the read and the write: the delta keeps its
	// decrement instead of writing the value read minus one over it.
	if _, err := buyInTxn(t, b, false, func() {
		testbed.MustExec(t, b.direct, "UPDATE sku SET stock = stock - 5 WHERE sku_id = 1")
	}, func(s int) int { return s - 1 }); err != nil {
		t.Fatal(err)
	}
	if got := b.count(t, "SELECT stock FROM sku WHERE sku_id = 1"); got != 2 {
		t.Fatalf("after a concurrent write: stock %d, want 2 (8 - 5 - 1)", got)
	}
}
