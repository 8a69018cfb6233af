package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"

	"github.com/lockproxy/lockproxy/rules"
)

// TestTextKeyLostUpdates holds a row through one spelling of its text key
// and writes it through another that MariaDB calls equal: under the
// column's collation, from a client in another character set, with an
// introducer, a hex literal, and as a text and a BLOB parameter. The
// writer must wait for the holder (lockproxy's 1205 naming the rule) and
// change nothing; once the holder rolls back, the same write changes the
// held row, which shows the spellings really are one row.
func TestTextKeyLostUpdates(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	tables := map[string]string{
		"general": "utf8mb4 COLLATE utf8mb4_general_ci",
		"uca":     "utf8mb4 COLLATE utf8mb4_uca1400_ai_ci",
		"ascs":    "utf8mb4 COLLATE utf8mb4_uca1400_as_cs",
		"swedish": "latin1 COLLATE latin1_swedish_ci",
		"german":  "latin1 COLLATE latin1_german2_ci",
	}
	for name, coll := range tables {
		testbed.MustExec(t, direct, "CREATE TABLE "+name+" (k VARCHAR(32) CHARACTER SET "+coll+" PRIMARY KEY, v INT NOT NULL)")
	}
	testbed.MustExec(t, direct,
		"INSERT INTO general VALUES ('i', 0), ('josé', 0), ('abc', 0), ('?', 0)",
		"INSERT INTO uca VALUES ('1001', 0), ('a', 0), ('é', 0)",
		"INSERT INTO ascs VALUES ('Kelvin', 0)",
		"INSERT INTO swedish VALUES ('y', 0), ('d', 0)",
		"INSERT INTO german VALUES ('ae', 0)")
	value := func(table, key string) int {
		t.Helper()
		var v int
		if err := direct.QueryRow("SELECT v FROM "+table+" WHERE k = ?", key).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, table, held string
		// names, sets the session's character set first; write is the text
		// the writer sends (its bytes in that set).
		names, write string
	}{
		{"dotless i is i", "general", "i", "", "UPDATE general SET v = v + 1 WHERE k = 'ı'"},
		{"latin1 client", "general", "josé", "latin1", "UPDATE general SET v = v + 1 WHERE k = 'jos\xe9'"},
		{"latin1 introducer", "general", "josé", "", "UPDATE general SET v = v + 1 WHERE k = _latin1 X'6A6F73E9'"},
		{"hex literal", "general", "josé", "", "UPDATE general SET v = v + 1 WHERE k = X'6A6F73C3A9'"},
		{"case and trailing space", "general", "abc", "", "UPDATE general SET v = v + 1 WHERE k = 'ABC  '"},
		{"arabic digits", "uca", "1001", "", "UPDATE uca SET v = v + 1 WHERE k = '١٠٠١'"},
		{"ignorable character", "uca", "a", "", "UPDATE uca SET v = v + 1 WHERE k = 'a\u200b'"},
		{"combining accent", "uca", "é", "", "UPDATE uca SET v = v + 1 WHERE k = 'e\u0301'"},
		{"kelvin sign", "ascs", "Kelvin", "", "UPDATE ascs SET v = v + 1 WHERE k = '\u212Aelvin'"},
		{"swedish u umlaut", "swedish", "y", "", "UPDATE swedish SET v = v + 1 WHERE k = 'ü'"},
		{"icelandic eth", "swedish", "d", "", "UPDATE swedish SET v = v + 1 WHERE k = 'ð'"},
		{"german2 expansion", "german", "ae", "", "UPDATE german SET v = v + 1 WHERE k = 'ä'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+"."+c.table, []string{"k"} })
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			if c.names != "" {
				if _, err := r.query("SET NAMES " + c.names); err != nil {
					t.Fatal(err)
				}
			}
			heldThenWritten(t, p, db, r, c.write, func() int { return value(c.table, c.held) },
				"UPDATE "+c.table+" SET v = v WHERE k = ?", c.held)
		})
	}

	// Literals are converted to character_set_connection: under latin1
	// 'ı' becomes '?', and MariaDB changes the row '?'. A SET of
	// collation_connection sets that character set too, unreported by
	// MariaDB, and a client may turn the reports off: either way the
	// session reads the character set again, and a literal the
	// conversion would change is refused, never keyed as written.
	for _, c := range []struct {
		name   string
		before []string
	}{
		{"connection collation", []string{"SET collation_connection = latin1_swedish_ci"}},
		{"connection character set, reports off", []string{"SET session_track_system_variables = ''", "SET character_set_connection = latin1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+".general", []string{"k"} })
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			for _, q := range c.before {
				if _, err := r.query(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			before := value("general", "?")
			_, err := r.query("UPDATE general SET v = v + 1 WHERE k = 'ı'")
			if me := myErr(t, err); me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy: rule sku-stock") {
				t.Fatalf("a literal latin1 turns into '?': want lockproxy's 1105 naming the rule, got %v", me)
			}
			if got := value("general", "?"); got != before {
				t.Fatalf("the refused write changed row '?': %d → %d", before, got)
			}
		})
	}

	t.Run("parameters", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+".general", []string{"k"} })
		for _, param := range []typedParam{
			wireText(mysql.MYSQL_TYPE_VAR_STRING, "JOSÉ"),
			wireText(mysql.MYSQL_TYPE_BLOB, "jos\xc3\xa9"),
		} {
			tx, err := p.db(t, db, "").BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("UPDATE general SET v = v WHERE k = 'jose'"); err != nil {
				t.Fatal(err)
			}
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			id, _ := r.prepare("UPDATE general SET v = v + 1 WHERE k = ?")
			_, _, err = r.executeTyped(id, param)
			if me := myErr(t, err); me.Code != 1205 || !strings.Contains(me.Message, "sku-stock") {
				t.Fatalf("parameter %v while 'jose' is held: want lockproxy's 1205, got %v", param, me)
			}
			_ = tx.Rollback()
		}
	})

	t.Run("numbers beyond what lockproxy reads exactly", func(t *testing.T) {
		testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (0, 1), (1001, 1), (1152921504606846976, 1)")
		p := guardedProxy(t, db, nil)
		stock := func(id string) func() int {
			return func() int {
				t.Helper()
				var v int
				if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = " + id).Scan(&v); err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		// MariaDB converts these strings to decimals of 38 fraction
		// digits: rows 1001, 1001 and 0. lockproxy asks it, so the holder
		// of the row stops the writer.
		for _, c := range []struct{ k, row string }{
			{"'1001.0000000000000000000000000000000000000001'", "1001"},
			{"'1000.99999999999999999999999999999999999999999'", "1001"},
			{"'1001e-400'", "0"},
		} {
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			heldThenWritten(t, p, db, r, "UPDATE sku SET stock = stock + 1 WHERE sku_id = "+c.k, stock(c.row), "UPDATE sku SET stock = stock WHERE sku_id = "+c.row)
		}
		// The same as STRING and BLOB parameters.
		for _, param := range []typedParam{
			wireText(mysql.MYSQL_TYPE_STRING, "1001."+strings.Repeat("0", 40)+"1"),
			wireText(mysql.MYSQL_TYPE_BLOB, "1000."+strings.Repeat("9", 42)),
		} {
			tx, err := p.db(t, db, "").BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("UPDATE sku SET stock = stock WHERE sku_id = 1001"); err != nil {
				t.Fatal(err)
			}
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			id, _ := r.prepare("UPDATE sku SET stock = stock + 1 WHERE sku_id = ?")
			_, _, err = r.executeTyped(id, param)
			if me := myErr(t, err); me.Code != 1205 || !strings.Contains(me.Message, "sku-stock") {
				t.Fatalf("parameter %v while row 1001 is held: want lockproxy's 1205, got %v", param, me)
			}
			_ = tx.Rollback()
		}
		// Stored, or a float several integers share, is still refused.
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		for _, q := range []string{"UPDATE sku SET stock = 0 WHERE sku_id = 1152921504606846976e0",
			"INSERT INTO sku (sku_id, stock) VALUES ('1001.0000000000000000000000000000000000000001', 0) ON DUPLICATE KEY UPDATE stock = 0"} {
			_, err := r.query(q)
			if me := myErr(t, err); me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
				t.Fatalf("%s: want lockproxy's 1105 naming the rule, got %v", q, me)
			}
		}
		var changed int
		if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE stock = 0").Scan(&changed); err != nil || changed != 0 {
			t.Fatalf("a refused statement ran: %d rows changed (%v)", changed, err)
		}
	})

	t.Run("refused when not one value", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+".swedish", []string{"k"} })
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		// U+0133 has no latin1 character: MariaDB refuses or replaces it.
		_, err := r.query("UPDATE swedish SET v = v + 1 WHERE k = 'ĳ'")
		if me := myErr(t, err); me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("a value the column's character set lacks: want lockproxy's 1105, got %v", me)
		}
		// A key longer than its column is keyed as its first 32
		// characters (TestClippedKeyLostUpdates); strict, MariaDB itself
		// refuses it.
		_, err = r.query(fmt.Sprintf("INSERT INTO swedish (k, v) VALUES ('%s', 1)", strings.Repeat("x", 33)))
		if me := myErr(t, err); me.Code != 1406 || strings.HasPrefix(me.Message, "lockproxy:") {
			t.Fatalf("a key longer than its column, strict: want MariaDB's 1406, got %v", me)
		}
	})
}

// TestNumberKeyLostUpdates holds row 1001 of an integer key through
// sku_id = 1001 and writes it through every other spelling MariaDB reads
// as that row: a string, a decimal, an exponent, a hex number, and the
// comparisons that pin the key as = does (BETWEEN k AND k, NOT (<>),
// IN (SELECT k)). The writer must wait (1205 naming the rule) and change
// nothing; once the holder rolls back, the same write changes row 1001.
func TestNumberKeyLostUpdates(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1000, 0), (1001, 0), (1002, 0)")
	stock := func() int {
		t.Helper()
		var v int
		if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1001").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	p := guardedProxy(t, db, nil)
	for _, where := range []string{
		"sku_id = '1001'",
		"sku_id = ' 1001'",
		"sku_id = 1001.000",
		"sku_id = '1001.0'",
		"sku_id = 1001e0",
		"sku_id = '1.001e3'",
		"sku_id = 0x3E9",
		"sku_id BETWEEN 1001 AND 1001",
		"NOT (sku_id <> 1001)",
		"sku_id IN (SELECT 1001)",
		"sku_id IN (1001, '1001.0')",
	} {
		t.Run(where, func(t *testing.T) {
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			heldThenWritten(t, p, db, r, "UPDATE sku SET stock = stock + 1 WHERE "+where, stock, "UPDATE sku SET stock = stock WHERE sku_id = 1001")
		})
	}
}

// heldThenWritten holds a row through hold (with args) in a transaction
// of p, sends write on r and wants it to wait for the holder (lockproxy's
// 1205 naming the rule) with value unchanged; once the holder rolls back,
// the same write must add 1 to value, which shows hold and write name one
// row.
func heldThenWritten(t *testing.T, p *testProxy, db string, r *rawConn, write string, value func() int, hold string, args ...any) {
	t.Helper()
	tx, err := p.db(t, db, "").BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(hold, args...); err != nil {
		t.Fatal(err)
	}
	before := value()
	_, err = r.query(write)
	if me := myErr(t, err); me.Code != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
		t.Fatalf("while %q %v holds the row: want lockproxy's 1205 naming the rule, got %v", hold, args, me)
	}
	if got := value(); got != before {
		t.Fatalf("the write ran while the row was held: %d → %d", before, got)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.query(write); err != nil {
		t.Fatalf("after the holder rolled back: %v", err)
	}
	if got := value(); got != before+1 {
		t.Fatalf("the write did not change the held row: %d → %d", before, got)
	}
}
