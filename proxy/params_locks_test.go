package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"

	"github.com/lockproxy/lockproxy/rules"
)

// TestTypedParamTakesItsRowLock executes prepared UPDATEs whose key is a
// binary TIME: MariaDB compares TIME 00:10:01 with a BIGINT key as 1001,
// so the statement must wait for row 1001's lock; with an INT key it also
// matches 101001001, so it must be refused.
func TestTypedParamTakesItsRowLock(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE sku_int (sku_id INT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (0, 10), (1001, 10)",
		"INSERT INTO sku_int VALUES (1001, 10), (101001001, 10)")
	time1001 := wireTime(false, 0, 0, 10, 1, 0)
	stocks := func(table string) string {
		t.Helper()
		var out []string
		rows, err := direct.Query("SELECT CONCAT(sku_id, '=', stock) FROM " + table + " ORDER BY sku_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}

	t.Run("BIGINT key waits for row 1001", func(t *testing.T) {
		p := guardedProxy(t, db, nil)
		tx, err := p.db(t, db, "").BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.Exec("UPDATE sku SET stock = stock WHERE sku_id = 1001"); err != nil {
			t.Fatal(err)
		}
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		id, _ := r.prepare("UPDATE sku SET stock = ? WHERE sku_id = ?")
		_, _, err = r.executeTyped(id, wireInt(tLonglong, 3), time1001)
		if me := myErr(t, err); me.Code != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("while row 1001 is held: want lockproxy's 1205 naming the rule, got %v", me)
		}
		if got := stocks("sku"); got != "0=10 1001=10" {
			t.Fatalf("the statement ran while the row was held: %s", got)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Free now; MariaDB really changes row 1001, the row that was locked.
		if _, _, err := r.executeTyped(id, wireInt(tLonglong, 3), time1001); err != nil {
			t.Fatalf("after the holder rolled back: %v", err)
		}
		if got := stocks("sku"); got != "0=10 1001=3" {
			t.Fatalf("rows after the update: %s, want row 1001 changed", got)
		}
	})

	t.Run("refused where MariaDB would match several keys", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table = db + ".sku_int" })
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		id, _ := r.prepare("UPDATE sku_int SET stock = ? WHERE sku_id = ?")
		_, _, err := r.executeTyped(id, wireInt(tLonglong, 3), time1001)
		me := myErr(t, err)
		if me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") ||
			!strings.Contains(me.Message, "parameter 2") || !strings.Contains(me.Message, "TIME 00:10:01") {
			t.Fatalf("TIME on an INT key: want lockproxy's 1105 naming the rule and the parameter, got %v", me)
		}
		// A YEAR parameter is NULL to MariaDB and takes no bytes: the
		// key's bytes are not where the protocol says.
		idSwap, _ := r.prepare("UPDATE sku_int SET stock = ? WHERE sku_id = ?")
		_, _, err = r.executeTyped(idSwap, wireInt(mysql.MYSQL_TYPE_YEAR, 1001), wireInt(tLonglong, 1001))
		if me := myErr(t, err); me.Code != 1105 || !strings.Contains(me.Message, "parameter 2") {
			t.Fatalf("key after a YEAR parameter: want 1105, got %v", me)
		}
		if got := stocks("sku_int"); got != "1001=10 101001001=10" {
			t.Fatalf("a refused statement ran: %s", got)
		}
	})
}

func myErr(t *testing.T, err error) *mysql.MyError {
	t.Helper()
	var me *mysql.MyError
	if !errors.As(err, &me) {
		t.Fatalf("want a MySQL error, got %v", err)
	}
	return me
}
