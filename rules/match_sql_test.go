package rules

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// TestMatchSQL matches real statements, analysed by lockproxy's parser.
func TestMatchSQL(t *testing.T) {
	rs := matchSet(t, Schema{})
	tests := []struct {
		sql     string
		inTxn   bool
		params  []any
		class   LockClass
		keys    string
		reject  bool
		rewrite bool
	}{
		{sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1001", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1001", rewrite: true},
		{sql: "update shop.SKU_STOCK set stock = stock - 1 where sku_id = '1001' and stock >= 1", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1001", rewrite: true},
		{sql: "SELECT stock FROM sku_stock WHERE sku_id IN (3, 1, 2, 1) FOR UPDATE", class: ClassLockingRead,
			keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2 sku-stock=shop.sku_stock/3"},
		{sql: "SELECT * FROM sku_stock WHERE sku_id = 1 OR (sku_id = 2 AND stock > 0) LOCK IN SHARE MODE", class: ClassLockingRead,
			keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2"},
		{sql: "SELECT * FROM sku_stock WHERE sku_id = 7", inTxn: true, class: ClassReadInTxn,
			keys: "sku-stock=shop.sku_stock/7"},
		{sql: "SELECT * FROM sku_stock WHERE sku_id = 7", class: ClassNone},
		{sql: "SELECT * FROM sku_stock WHERE stock > 5 FOR UPDATE", class: ClassLockingRead, reject: true},
		{sql: "SELECT * FROM sku_stock WHERE sku_id = NULL FOR UPDATE", class: ClassLockingRead, reject: true},
		{sql: "SELECT * FROM sku_stock WHERE sku_id IS NULL FOR UPDATE", class: ClassLockingRead, reject: true},
		{sql: "INSERT INTO sku_stock (sku_id, stock) VALUES (1, 5), ('2', 6)", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2", rewrite: true},
		{sql: "INSERT INTO sku_stock (sku_id, stock) VALUES (?, ?)", params: []any{int64(42), int64(1)}, class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/42", rewrite: true},
		{sql: "DELETE FROM sku_stock WHERE sku_id = ?", params: []any{[]byte("0042")}, class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/42", rewrite: true},
		{sql: "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", params: []any{nil, nil}, class: ClassWrite,
			reject: true, rewrite: true},
		{sql: "UPDATE sku_stock SET sku_id = 2 WHERE sku_id = 1", class: ClassWrite,
			keys: "sku-stock=shop.sku_stock/1 sku-stock=shop.sku_stock/2", rewrite: true},
		{sql: "SELECT s.stock, w.balance FROM shop.sku_stock s JOIN bank.wallet w ON w.id = 9 WHERE s.sku_id = 5 FOR UPDATE",
			class: ClassLockingRead, keys: "wallet=bank.wallet/9 sku-stock=shop.sku_stock/5"},
		{sql: "UPDATE bank.wallet SET balance = 0 WHERE id = 3", class: ClassWrite, keys: "wallet=bank.wallet/3"},
	}
	for _, tt := range tests {
		t.Run(tt.sql, func(t *testing.T) {
			a, err := parser.Analyze(tt.sql, "shop")
			if err != nil || a.Unparsed || len(a.Stmts) != 1 {
				t.Fatalf("Analyze: %v unparsed=%v (%s)", err, a != nil && a.Unparsed, a.ParseError)
			}
			d := rs.Match(a.Stmts[0], "shop", tt.inTxn)
			if d.NeedParams != (tt.params != nil) {
				t.Fatalf("NeedParams = %v", d.NeedParams)
			}
			d = d.Bind(tt.params)
			if d.Rule == nil || d.Class != tt.class || keyNames(d) != tt.keys || d.Reject != tt.reject || (d.Rewrite != nil) != tt.rewrite {
				t.Fatalf("rule=%v class=%q keys=%q reject=%v (%s) rewrite=%v",
					d.Rule != nil, d.Class, keyNames(d), d.Reject, d.UnkeyedReason(), d.Rewrite != nil)
			}
		})
	}
}

func TestMatchSQLUnparsed(t *testing.T) {
	rs := matchSet(t, Schema{})
	a, err := parser.Analyze("UPDATE sku_stock SET stock = 1 WHERE sku_id = 1 RETURNING garbage garbage", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Unparsed {
		t.Fatal("the parser accepts this text now: pick another unparsable statement")
	}
	if d := rs.MatchUnparsed(a, "shop"); d.Rule == nil || !d.Reject {
		t.Fatalf("unparsed write to a guarded table: rule=%v reject=%v", d.Rule != nil, d.Reject)
	}
}

// TestUnkeyedReadInTxn: a plain read in a transaction whose rows cannot be
// keyed runs without locks (reported in UnkeyedReads) unless the rule says
// on_unkeyed_read: reject; keyed reads and unkeyed writes are unaffected.
func TestUnkeyedReadInTxn(t *testing.T) {
	tests := []struct {
		name, sql, onRead string
		params            []any
		reject            bool
		reads             int
		keys              string
	}{
		{name: "range allowed", sql: "SELECT * FROM sku_stock WHERE sku_id > 5 ORDER BY sku_id", reads: 1},
		{name: "full scan allowed", sql: "SELECT * FROM sku_stock ORDER BY sku_id", reads: 1},
		{name: "keyed still locks", sql: "SELECT * FROM sku_stock WHERE sku_id = 7", keys: "sku-stock=shop.sku_stock/7"},
		{name: "NULL parameter allowed", sql: "SELECT * FROM sku_stock WHERE sku_id = ?", params: []any{nil}, reads: 1},
		{name: "range rejected", sql: "SELECT * FROM sku_stock WHERE sku_id > 5", onRead: "reject", reject: true},
		{name: "parameter rejected", sql: "SELECT * FROM sku_stock WHERE sku_id = ?", params: []any{nil}, onRead: "reject", reject: true},
		{name: "locking read still rejected", sql: "SELECT * FROM sku_stock WHERE sku_id > 5 FOR UPDATE", reject: true},
		{name: "write still rejected", sql: "UPDATE sku_stock SET stock = 0", reject: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := matchSet(t, Schema{})
			for i := range rs.cfg.Rules {
				if tt.onRead != "" {
					rs.cfg.Rules[i].OnUnkeyedRead = tt.onRead
				}
			}
			a, err := parser.Analyze(tt.sql, "shop")
			if err != nil || a.Unparsed {
				t.Fatalf("Analyze: %v", err)
			}
			d := rs.Match(a.Stmts[0], "shop", true).Bind(tt.params)
			if d.Reject != tt.reject || len(d.UnkeyedReads) != tt.reads || keyNames(d) != tt.keys {
				t.Fatalf("reject=%v (%s) unkeyed reads=%v keys=%q", d.Reject, d.RejectReason(), d.UnkeyedReads, keyNames(d))
			}
			if tt.reject && tt.onRead == "reject" && !strings.Contains(d.RejectReason(), "on_unkeyed_read: reject") {
				t.Errorf("message %q does not name on_unkeyed_read", d.RejectReason())
			}
		})
	}
}
