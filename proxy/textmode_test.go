package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// outcome runs one query on conn and returns its rows as text, or
// "error" when the server refused it (the message names the text, so
// only the fact of an error compares).
func outcome(t *testing.T, conn *sql.Conn, q string) string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), q)
	if err != nil {
		return "error"
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			out = append(out, fmt.Sprintf("%v:%s", v.Valid, v.String))
		}
	}
	if rows.Err() != nil {
		return "error"
	}
	return strings.Join(out, ",")
}

// TestExecutableCommentsMatchServer is a differential test of
// parser.Expand against MariaDB itself: for each text, the server's answer
// to the text must equal its answer to what Expand says it runs (which
// holds no comment left to interpret).
func TestExecutableCommentsMatchServer(t *testing.T) {
	bed := testbedFor(t)
	db := openDB(t, bed.DSN(bed.PrimaryAddr, "", ""))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	v := parser.ServerVersionOf(version)
	if v < 100000 {
		t.Fatalf("server version %q read as %d", version, v)
	}
	at, past := fmt.Sprint(v), fmt.Sprint(v+1)
	cases := []struct{ mode, sql string }{
		{"", "SELECT 1 /*M! +1 */"},
		{"", "SELECT 1 /*!100000 +1 */"},
		{"", "SELECT 1 /*!999999 +1 */"},
		{"", "SELECT 1 /*!50700 +1 */"},
		{"", "SELECT 1 /*!99999 +1 */"},
		{"", "SELECT 1 /*M!50700 +1 */"},
		{"", "SELECT 1 /*!40000 +1 */"},
		{"", "SELECT 1 /*!" + at + " +1 */"},
		{"", "SELECT 1 /*!" + past + " +1 */"},
		{"", "SELECT 1 /*M!" + at + " +1 */"},
		{"", "SELECT 1 /*M!" + past + " +1 */"},
		{"", "SELECT 1 /*!1000000 +1 */"},
		{"", "SELECT 1 /*!4000 +1 */"},
		{"", "SELECT 1 /*!+1 */"},
		{"", "SELECT 1 /*m! +1 */"},
		{"", "SELECT 1 /*T! +1 */"},
		{"", "SELECT 1 /*T![clustered_index] +1 */"},
		{"", "SELECT 1 /*+ +1 */"},
		{"", "SELECT 1 --1"},
		{"", "SELECT 1 -- 1"},
		{"", "SELECT 1 --\t1"},
		{"", "SELECT 1 --\x01+1"},
		{"", "SELECT 1 --"},
		{"", "SELECT 1 #+1\n+2"},
		{"", "SELECT 1 /*!999999 /* +1 */ +2 */ +4"},
		{"", "SELECT 1 /*! +1 /* +2 */ +4 */"},
		{"", "SELECT 1 /*! +1 /*!999999 +2 */ +4 */"},
		{"", "SELECT 1 /* /* +1 */ +2 */"},
		{"", "SELECT 1 /*! + LENGTH('*/') */"},
		{"", "SELECT 1 /*!999999 + LENGTH('*/') */"},
		{"", "SELECT 1 /*! -- +2 \n +4 */"},
		{"", `SELECT LENGTH('a\' /* '), 1 /* x */`},
		{"NO_BACKSLASH_ESCAPES", `SELECT LENGTH('a\' /* '), 1 /* x */`},
		{"NO_BACKSLASH_ESCAPES", `SELECT LENGTH('a\'), 1 /* ' */`},
		{"", `SELECT "x" FROM (SELECT 5 AS x) t /* " */`},
		{"ANSI_QUOTES", `SELECT "x" FROM (SELECT 5 AS x) t /* " */`},
		{"ANSI_QUOTES", `SELECT "x\" FROM (SELECT 5 AS x) t -- "`},
		{"ANSI", `SELECT 1 /*M! || 0 */`},
		{"", `SELECT x'41' /* ' */, 2`},
		{"", "SELECT `a /* b` FROM (SELECT 5 AS `a /* b`) t /*M! , 6 */"},
	}
	for _, c := range cases {
		t.Run(c.mode+" "+c.sql, func(t *testing.T) {
			if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?", c.mode); err != nil {
				t.Fatal(err)
			}
			text, why := parser.Expand(c.sql, parser.Options{Mode: parser.ParseSQLMode(c.mode), ServerVersion: v})
			if why != "" {
				t.Fatalf("Expand is uncertain (%s) on a text it should settle", why)
			}
			got, want := outcome(t, conn, text), outcome(t, conn, c.sql)
			if got != want {
				t.Errorf("the server answers %q to the text, %q to its expansion %q", want, got, text)
			}
		})
	}
}

// stocks returns the stock of rows 1 and 2, read on the primary.
func stocks(t *testing.T, p *testProxy, db string) string {
	t.Helper()
	var a, b int
	if err := p.direct(t, db, "").QueryRow("SELECT (SELECT stock FROM sku WHERE sku_id = 1), (SELECT stock FROM sku WHERE sku_id = 2)").Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(a, " ", b)
}

// TestServerReadingGuarded sends texts whose rows only MariaDB's own
// reading tells (executable comments, sql_mode) through lockproxy: each
// must be refused with lockproxy's 1105, changing no row, as its keys
// cannot be derived from what the server runs.
func TestServerReadingGuarded(t *testing.T) {
	p, db, _ := skuProxy(t, "(1, 10), (2, 10)")
	cases := []struct {
		name string
		mode string // sql_mode set through the proxy first
		sql  string
	}{
		{"M comment holds the UPDATE", "", "/*M!100000 UPDATE sku SET stock = 0 */"},
		{"M comment widens the WHERE", "", "UPDATE sku SET stock = 7 WHERE sku_id = 1 /*M! OR 1=1 */"},
		{"M comment opens the statement", "", "/*M! UPDATE sku SET stock = 42 WHERE sku_id IN */ (SELECT sku_id FROM sku)"},
		{"ANSI_QUOTES set by CONCAT", "CONCAT(@@sql_mode, ',ANSI_QUOTES')", `UPDATE sku SET stock = 7 WHERE sku_id = "sku_id"`},
		{"NO_BACKSLASH_ESCAPES", "'NO_BACKSLASH_ESCAPES'", `UPDATE sku SET stock = 7 WHERE sku_id = 'x\' OR 1=1 -- '`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := p.db(t, db, "").Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			if c.mode != "" {
				if _, err := conn.ExecContext(ctx, "SET sql_mode = "+c.mode); err != nil {
					t.Fatal(err)
				}
			}
			_, err = conn.ExecContext(ctx, c.sql)
			if err == nil {
				t.Fatalf("ran; rows now %s", stocks(t, p, db))
			}
			if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
				t.Fatalf("want lockproxy's 1105, got %v", me)
			}
			if got := stocks(t, p, db); got != "10 10" {
				t.Fatalf("rows changed: %s", got)
			}
			// Back to the default mode, the session's keyed UPDATE runs:
			// the proxy read the mode again.
			if _, err := conn.ExecContext(ctx, "SET sql_mode = DEFAULT"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, `UPDATE sku SET stock = 10 WHERE sku_id = "1"`); err != nil {
				t.Fatalf("keyed UPDATE after SET sql_mode = DEFAULT: %v", err)
			}
		})
	}
}

// TestUncertainTextRefused expects the refusal of Uncertain analyses for
// guarded tables (docs/cannot-see.md), wired in the guard: a text that changes
// sql_mode before a later statement, whose keys the parser read under the
// old mode, must be refused with 1105 and change no row.
func TestUncertainTextRefused(t *testing.T) {
	p, db, _ := skuProxy(t, "(1, 10), (2, 10)")
	sqlDB := p.db(t, db, "multiStatements=true")
	for _, q := range []string{
		`SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'); UPDATE sku SET stock = 7 WHERE sku_id = "sku_id"`,
	} {
		t.Run(q, func(t *testing.T) {
			_, err := sqlDB.Exec(q)
			if err == nil {
				t.Fatalf("ran; rows now %s", stocks(t, p, db))
			}
			if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
				t.Fatalf("want lockproxy's 1105, got %v", me)
			}
			if got := stocks(t, p, db); got != "10 10" {
				t.Fatalf("rows changed: %s", got)
			}
		})
	}
}

// TestModeReadOnlyWhenChanged: lockproxy reads the session's sql_mode
// again (a query on the client's connection, which resets ROW_COUNT(),
// FOUND_ROWS() and the warnings) only after a command that may change it.
// EXECUTE of a statement it saw prepared is judged by that statement: an
// UPDATE leaves ROW_COUNT() and FOUND_ROWS() for the client, a SET
// sql_mode makes lockproxy read the mode before the next statement, as a
// direct SET does.
func TestModeReadOnlyWhenChanged(t *testing.T) {
	p, db, _ := skuProxy(t, "(1, 10), (2, 10), (3, 10)")
	ctx := context.Background()
	conn, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustConnExec(t, conn,
		"PREPARE u FROM 'UPDATE sku SET stock = stock - 1 WHERE sku_id IN (1, 2)'",
		"PREPARE s FROM 'SELECT SQL_CALC_FOUND_ROWS stock FROM sku WHERE sku_id IN (1, 2, 3) LIMIT 1'",
		"PREPARE m FROM 'SET sql_mode = CONCAT(@@sql_mode, '',ANSI_QUOTES'')'")
	one := func(q string) string {
		t.Helper()
		var v string
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	mustConnExec(t, conn, "EXECUTE u")
	if got := one("SELECT ROW_COUNT()"); got != "2" {
		t.Errorf("ROW_COUNT() after EXECUTE of an UPDATE of 2 rows: %s, want 2", got)
	}
	if got := outcome(t, conn, "EXECUTE s"); got != "true:9" {
		t.Fatalf("EXECUTE s: %s", got)
	}
	if got := one("SELECT FOUND_ROWS()"); got != "3" {
		t.Errorf("FOUND_ROWS() after EXECUTE of SQL_CALC_FOUND_ROWS over 3 rows: %s, want 3", got)
	}
	// A mode set through EXECUTE is read before the next statement: the
	// double-quoted "sku_id" is then a column, and the UPDATE is refused.
	mustConnExec(t, conn, "EXECUTE m")
	_, err = conn.ExecContext(ctx, `UPDATE sku SET stock = 7 WHERE sku_id = "sku_id"`)
	if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("UPDATE under ANSI_QUOTES set by EXECUTE: %v; want lockproxy's 1105", err)
	}
	if got := stocks(t, p, db); got != "9 9" {
		t.Fatalf("rows 1 and 2: %s, want 9 9", got)
	}
}

// TestNoBreakSpaceGuarded: in latin1 byte 0xa0 (a no-break space) is
// white space to MariaDB, so UPDATE<0xa0>sku is an UPDATE of sku on a
// latin1 connection: lockproxy must read it so, and lock its row. The same
// in the other character sets with such a byte (latin2's 0xa0, the DOS
// code pages' 0xff; parser.BlankByte).
func TestNoBreakSpaceGuarded(t *testing.T) {
	for _, cs := range []string{"latin1", "latin2", "cp1250", "cp852", "cp866"} {
		t.Run(cs, func(t *testing.T) {
			b := string([]byte{parser.BlankByte(cs)})
			if b == "\x00" {
				t.Fatalf("%s has no white space above ASCII", cs)
			}
			sp := func(q string) string { return strings.ReplaceAll(q, " ", b) }
			p, db, _ := skuProxy(t, "(1, 10), (2, 10)")
			conn, err := p.db(t, db, "charset="+cs).Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			// Unkeyed: refused, no row changed.
			_, err = conn.ExecContext(ctx, sp("UPDATE sku SET stock = 7"))
			if err == nil {
				t.Fatalf("an unkeyed UPDATE ran; rows now %s", stocks(t, p, db))
			}
			if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
				t.Fatalf("want lockproxy's 1105, got %v", me)
			}
			if got := stocks(t, p, db); got != "10 10" {
				t.Fatalf("rows changed: %s", got)
			}
			// Keyed: runs.
			if _, err := conn.ExecContext(ctx, sp("UPDATE sku SET stock = 7 WHERE sku_id = 1")); err != nil {
				t.Fatalf("keyed UPDATE: %v", err)
			}
			if got := stocks(t, p, db); got != "7 10" {
				t.Fatalf("rows: %s, want 7 10", got)
			}
		})
	}
}
