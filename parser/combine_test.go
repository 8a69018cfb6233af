package parser

import "testing"

func TestCombineUpdate(t *testing.T) {
	tests := []struct {
		sql      string
		params   []any
		reason   string
		delta    int64
		hasFloor bool
		floor    int64
		sel, upd string
	}{
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 7 AND stock >= 1", delta: -1, hasFloor: true, floor: 1,
			sel: "SELECT `stock` FROM `sku_stock` WHERE `sku_id` = 7 FOR UPDATE",
			upd: "UPDATE `sku_stock` SET `stock`=`stock` - 5 WHERE `sku_id` = 7"},
		{sql: "UPDATE shop.sku_stock s SET s.stock = s.stock - ? WHERE s.sku_id = ? AND s.stock - ? >= 0", params: []any{int64(3), int64(9), int64(3)},
			delta: -3, hasFloor: true, floor: 3},
		{sql: "UPDATE sku_stock SET stock = 2 + stock WHERE (sku_id = 'a') AND (stock > 0)", delta: 2, hasFloor: true, floor: 1},
		{sql: "UPDATE sku_stock SET stock = stock + 4 WHERE sku_id = 1", delta: 4},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE 1 <= stock AND 5 = sku_id", delta: -1, hasFloor: true, floor: 1},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock + 2 > -3", delta: -1, hasFloor: true, floor: -4},
		{sql: "UPDATE sku_stock SET stock = stock - 1.5 WHERE sku_id = 1", reason: CombineNotInteger},
		{sql: "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = 1", params: []any{"1"}, reason: CombineNotInteger},
		{sql: "UPDATE sku_stock SET stock = stock - 1, n = n + 1 WHERE sku_id = 1", reason: CombineAssignments},
		{sql: "UPDATE sku_stock SET stock = 5 WHERE sku_id = 1", reason: CombineAssignments},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 LIMIT 1", reason: CombineModifiers},
		{sql: "UPDATE IGNORE sku_stock SET stock = stock - 1 WHERE sku_id = 1", reason: CombineModifiers},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1 AND stock >= 2", reason: CombineCondition},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND other >= 1", reason: CombineCondition},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 OR stock >= 1", reason: CombineCondition},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND sku_id = 2", reason: CombineKey},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE stock >= 1", reason: CombineKey},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= @v", reason: CombineCondition},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = NOW()", reason: CombineCondition},
		{sql: "UPDATE sku_stock, t SET stock = stock - 1 WHERE sku_id = 1", reason: CombineNotUpdate},
		{sql: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND other.stock >= 1", reason: CombineCondition},
	}
	for _, tc := range tests {
		t.Run(tc.sql, func(t *testing.T) {
			a, err := Analyze(tc.sql, "shop")
			if err != nil || a.Unparsed {
				t.Fatalf("Analyze: %v %v", err, a.ParseError)
			}
			params := tc.params
			if params == nil {
				params = []any{}
			}
			c, reason, err := CombineUpdate(a.Stmts[0], "Stock", []string{"sku_id"}, params)
			if err != nil {
				t.Fatal(err)
			}
			if reason != tc.reason {
				t.Fatalf("reason %q, want %q", reason, tc.reason)
			}
			if reason != "" {
				return
			}
			if c.Delta != tc.delta || c.HasFloor != tc.hasFloor || c.Floor != tc.floor {
				t.Fatalf("delta %d floor %v %d, want %d %v %d", c.Delta, c.HasFloor, c.Floor, tc.delta, tc.hasFloor, tc.floor)
			}
			if tc.sel != "" && c.Select != tc.sel {
				t.Errorf("select %q, want %q", c.Select, tc.sel)
			}
			if tc.upd != "" {
				u, err := c.Update(-5)
				if err != nil || u != tc.upd {
					t.Errorf("update %q %v, want %q", u, err, tc.upd)
				}
			}
			for _, q := range []string{c.Select} {
				if _, err := Parse(q); err != nil {
					t.Errorf("%q does not parse: %v", q, err)
				}
			}
		})
	}
}
