package proxy

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// skuProxy makes a fresh database with db.sku(sku_id, stock) holding
// rows (VALUES text), and a proxy guarding it as guardedProxy does.
func skuProxy(t *testing.T, rows string) (p *testProxy, db string, direct *sql.DB) {
	t.Helper()
	base := startProxy(t, nil)
	db = freshDB(t, base)
	direct = base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES "+rows)
	return guardedProxy(t, db, nil), db, direct
}

// skuStock reads row id's stock directly from the primary.
func skuStock(t *testing.T, direct *sql.DB, id int) int {
	t.Helper()
	var n int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantRefused checks that err is lockproxy's 1105 naming the rule.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: ran; want lockproxy's 1105", what)
	}
	me := mysqlErr(t, err)
	if me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
		t.Fatalf("%s: want lockproxy's 1105 naming the rule, got %v", what, me)
	}
}

// TestDynamicSQLLocks: SQL-level PREPARE/EXECUTE and EXECUTE IMMEDIATE are
// planned as the statements they run: keyed through user variables set
// from literals, refused when their text or values are not known.
func TestDynamicSQLLocks(t *testing.T) {
	p, db, direct := skuProxy(t, "(1, 10), (2, 10)")
	holder := p.db(t, db, "")
	c := p.db(t, db, "multiStatements=true")
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

	for _, q := range []string{
		"PREPARE p FROM 'UPDATE sku SET stock = 0'; EXECUTE p",
		"EXECUTE IMMEDIATE 'UPDATE sku SET stock = 0'",
		"EXECUTE IMMEDIATE CONCAT('UPDATE sku ', 'SET stock = 0')",
		"SET @q = CONCAT('UPDATE sku ', 'SET stock = 0'); PREPARE p FROM @q",
		"PREPARE p FROM CONCAT('UPDATE sku ', 'SET stock = 0')",
		"EXECUTE never_prepared",
		"EXECUTE IMMEDIATE 'SELECT ?' USING @k; UPDATE sku SET stock = 0",
		"EXECUTE IMMEDIATE 'SELECT 1'; UPDATE sku SET stock = 0",
	} {
		_, err := c.Exec(q)
		wantRefused(t, q, err)
	}
	if stock(1) != 10 || stock(2) != 10 {
		t.Fatalf("a refused statement changed rows: %d %d", stock(1), stock(2))
	}

	// Keys through USING @v, and through a literal EXECUTE IMMEDIATE: row 1
	// is held, so each must wait and time out, never run at once.
	if _, err := c.Exec("SET @k = 1, @t = 'UPDATE sku SET stock = 1 WHERE sku_id = 1'; PREPARE p FROM 'UPDATE sku SET stock = 1 WHERE sku_id = ?'"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"EXECUTE p USING @k",
		"SET @j = 1; PREPARE p2 FROM 'UPDATE sku SET stock = 1 WHERE sku_id = ?'; EXECUTE p2 USING @j",
		"EXECUTE IMMEDIATE 'UPDATE sku SET stock = 1 WHERE sku_id = ?' USING @k",
		"EXECUTE IMMEDIATE 'UPDATE sku SET stock = 1 WHERE sku_id = 1'",
		"EXECUTE IMMEDIATE @t",
	} {
		begin := time.Now()
		_, err := c.Exec(q)
		if me := mysqlErr(t, err); me.Number != 1205 {
			t.Fatalf("%s: want 1205 while row 1 is held, got %v", q, me)
		}
		if time.Since(begin) < 200*time.Millisecond {
			t.Fatalf("%s: answered before the wait timeout", q)
		}
	}
	// A value lockproxy cannot know: refused.
	for _, q := range []string{
		"SET @k = 1 + 1; EXECUTE p USING @k",
		"SELECT 1 INTO @k; EXECUTE p USING @k",
		"EXECUTE IMMEDIATE 'UPDATE sku SET stock = 1 WHERE sku_id = ?' USING 2",
	} {
		_, err := c.Exec(q)
		wantRefused(t, q, err)
	}
	// Another row is free: the prepared statement runs, keyed on row 2.
	if _, err := c.Exec("SET @k = 2; EXECUTE p USING @k"); err != nil {
		t.Fatal(err)
	}
	if stock(1) != 10 || stock(2) != 1 {
		t.Fatalf("stock = %d %d, want 10 1", stock(1), stock(2))
	}
	// DEALLOCATE forgets it.
	if _, err := c.Exec("DEALLOCATE PREPARE p"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec("EXECUTE p USING @k")
	wantRefused(t, "EXECUTE after DEALLOCATE", err)
}

// TestChangeUserReleasesLocks: COM_CHANGE_USER rolls the transaction back
// on the backend, so its locks go at once.
func TestChangeUserReleasesLocks(t *testing.T) {
	p, db, _ := skuProxy(t, "(3, 10)")
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	for _, q := range []string{"BEGIN", "UPDATE sku SET stock = 5 WHERE sku_id = 3"} {
		if _, err := r.query(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	other := p.db(t, db, "")
	_, err := other.Exec("UPDATE sku SET stock = 6 WHERE sku_id = 3")
	if me := mysqlErr(t, err); me.Number != 1205 {
		t.Fatalf("while held: want 1205, got %v", me)
	}
	if err := r.changeUser(p.bed.User, p.bed.Password, db); err != nil {
		t.Fatalf("COM_CHANGE_USER: %v", err)
	}
	if _, err := other.Exec("UPDATE sku SET stock = 6 WHERE sku_id = 3"); err != nil {
		t.Fatalf("after COM_CHANGE_USER the lock must be free: %v", err)
	}
	var stock int
	if err := other.QueryRow("SELECT stock FROM sku WHERE sku_id = 3").Scan(&stock); err != nil || stock != 6 {
		t.Fatalf("stock = %d, %v; want 6 (the changed user's transaction rolled back)", stock, err)
	}
}

// TestShortExecute: a COM_STMT_EXECUTE cut short of its fixed header gets
// MariaDB's 1210, on a statement a replica could serve too, and the
// session goes on.
func TestShortExecute(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY)")
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	id, _ := r.prepare("SELECT id FROM t")
	for n := 0; n < 5; n++ { // 5 to 9 bytes: the header needs 10
		r.send(stmtPayload(mysql.COM_STMT_EXECUTE, id, make([]byte, n)...)...)
		_, _, err := r.result(true)
		wantError(t, "short COM_STMT_EXECUTE", err, 1210, true)
	}
	rows, err := r.query("SELECT 7")
	wantRows(t, "after short executes", rows, err, "7")
}

// TestResetConnectionReleasesLocks: COM_RESET_CONNECTION rolls the
// transaction back, and its locks go with it.
func TestResetConnectionReleasesLocks(t *testing.T) {
	p, db, _ := skuProxy(t, "(3, 10)")
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	for _, q := range []string{"BEGIN", "UPDATE sku SET stock = 5 WHERE sku_id = 3"} {
		if _, err := r.query(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r.send(mysql.COM_RESET_CONNECTION)
	if ok, _, err := r.result(false); err != nil || ok == nil {
		t.Fatalf("COM_RESET_CONNECTION: %v %v", ok, err)
	}
	other := p.db(t, db, "")
	if _, err := other.Exec("UPDATE sku SET stock = 6 WHERE sku_id = 3"); err != nil {
		t.Fatalf("after COM_RESET_CONNECTION the lock must be free: %v", err)
	}
}

// TestLongDataKeyTooLong: long data beyond what lockproxy keeps for a key
// cannot name a row by its prefix ('000…0001001' is 1001 to an integer
// column): the statement is refused, never keyed on the prefix.
func TestLongDataKeyTooLong(t *testing.T) {
	p, db, direct := skuProxy(t, "(1001, 10)")
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	id, _ := r.prepare("UPDATE sku SET stock = 0 WHERE sku_id = ?")
	value := strings.Repeat("0", maxLongKey+10) + "1001"
	for chunk := value; chunk != ""; {
		n := min(len(chunk), 16<<10)
		r.send(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, chunk[:n]...)...)...)
		chunk = chunk[n:]
	}
	_, _, err := r.execute(id, true, longData{})
	wantError(t, "long key beyond the cap", err, 1105, true)
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1001").Scan(&stock); err != nil || stock != 10 {
		t.Fatalf("stock = %d, %v; want 10 (not run)", stock, err)
	}
	// The next execute with a plain value runs.
	if ok, _, err := r.execute(id, true, int64(1001)); err != nil || ok == nil || ok.AffectedRows != 1 {
		t.Fatalf("execute after: %v %v", ok, err)
	}
}

// TestRefusedExecuteDropsLongData: an execute lockproxy does not send (here
// a lock wait that times out) must not leave its long data on the server,
// which would bind it to the next execute, keyed by lockproxy on that
// execute's own values.
func TestRefusedExecuteDropsLongData(t *testing.T) {
	p, db, direct := skuProxy(t, "(2, 10), (1001, 10)")
	holder, err := p.db(t, db, "").Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec("SELECT stock FROM sku WHERE sku_id = 1001 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	id, _ := r.prepare("UPDATE sku SET stock = 0 WHERE sku_id = ?")
	r.send(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, id, append([]byte{0, 0}, "1001"...)...)...)
	_, _, err = r.execute(id, true, longData{})
	wantError(t, "execute while row 1001 is held", err, 1205, true)
	if ok, _, err := r.execute(id, true, int64(2)); err != nil || ok == nil || ok.AffectedRows != 1 {
		t.Fatalf("execute for row 2: %v %v", ok, err)
	}
	var s2 int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 2").Scan(&s2); err != nil || s2 != 0 {
		t.Fatalf("row 2 stock = %d, %v; want 0", s2, err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	var s1001 int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1001").Scan(&s1001); err != nil || s1001 != 10 {
		t.Fatalf("row 1001 stock = %d, %v; want 10 (written without its lock)", s1001, err)
	}
}

// TestStoredCodeForgetsUserVariables: a stored function (or procedure, or
// trigger) may SET @k behind lockproxy's back, so after a statement runs
// one, an EXECUTE keyed on @k is refused instead of keyed on the old value.
func TestStoredCodeForgetsUserVariables(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 10)",
		"CREATE FUNCTION setk() RETURNS INT NO SQL BEGIN SET @k = 2; RETURN 1; END")
	p := guardedProxy(t, db, nil)
	c := p.db(t, db, "multiStatements=true")
	c.SetMaxOpenConns(1)
	if _, err := c.Exec("SET @k = 1; PREPARE p FROM 'UPDATE sku SET stock = 0 WHERE sku_id = ?'"); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := c.QueryRow("SELECT setk()").Scan(&one); err != nil {
		t.Fatal(err)
	}
	_, err := c.Exec("EXECUTE p USING @k")
	wantRefused(t, "EXECUTE after a function set @k", err)
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 2").Scan(&stock); err != nil || stock != 10 {
		t.Fatalf("row 2: stock %d, %v; want 10, untouched", stock, err)
	}
}

// TestDynamicSQLHiddenByAnotherReading: a text the parser cannot read
// (MariaDB's LIMIT ROWS EXAMINED) that runs a prepared guarded UPDATE is
// refused however the session reads its strings: under
// NO_BACKSLASH_ESCAPES the EXECUTE after '\' is code, though the default
// reading puts it inside a string. It once ran without the row's lock.
func TestDynamicSQLHiddenByAnotherReading(t *testing.T) {
	p, db, direct := skuProxy(t, "(1, 10)")
	c := p.db(t, db, "multiStatements=true")
	c.SetMaxOpenConns(1)
	testbed.MustExec(t, c, "PREPARE s FROM 'UPDATE sku SET stock = stock - 1 WHERE sku_id = 1'",
		"SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
	_, err := c.Exec(`SELECT 1 LIMIT ROWS EXAMINED 10; SELECT '\'; EXECUTE s; #'`)
	wantRefused(t, "EXECUTE after '\\' in an unparsable text", err)
	var n int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&n); err != nil || n != 10 {
		t.Fatalf("stock %d (%v), want 10: the hidden EXECUTE ran", n, err)
	}
}
