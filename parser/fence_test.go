package parser

import (
	"strings"
	"testing"
)

func TestFenceUpdate(t *testing.T) {
	cases := []struct {
		sql         string
		params      []any
		update, chk string
		ok          bool
	}{
		{"UPDATE sku SET stock = stock - 1 WHERE sku_id = 7", nil,
			"UPDATE `sku` SET `stock`=`stock`-1,`fence`=42 WHERE (`sku_id`=7) AND `fence`<42",
			"SELECT COUNT(1) FROM `sku` WHERE (`sku_id`=7) AND `fence`>=42", true},
		{"UPDATE shop.sku s SET s.stock = ? WHERE s.sku_id = ? AND s.stock > 0", []any{int64(3), "it's 7"},
			"UPDATE `shop`.`sku` AS `s` SET `s`.`stock`=3,`fence`=42 WHERE (`s`.`sku_id`='it''s 7' AND `s`.`stock`>0) AND `fence`<42",
			"SELECT COUNT(1) FROM `shop`.`sku` AS `s` WHERE (`s`.`sku_id`='it''s 7' AND `s`.`stock`>0) AND `fence`>=42", true},
		{"UPDATE sku SET fence = 1 WHERE sku_id = 7", nil, "", "", false},
		{"UPDATE a, b SET a.x = b.x WHERE a.id = b.id AND a.id = 1", nil, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			an, err := Analyze(c.sql, "shop")
			if err != nil || len(an.Stmts) != 1 {
				t.Fatal(err)
			}
			up, chk, ok, reason, err := FenceUpdate(an.Stmts[0], "fence", 42, c.params)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok {
				t.Fatalf("ok = %v (%s)", ok, reason)
			}
			if !ok {
				return
			}
			if norm(up) != norm(c.update) || norm(chk) != norm(c.chk) {
				t.Fatalf("got\n %s\n %s\nwant\n %s\n %s", up, chk, c.update, c.chk)
			}
			for _, s := range []string{up, chk} {
				if stmts, err := Parse(s); err != nil || len(stmts) != 1 {
					t.Fatalf("%s does not parse as one statement: %v", s, err)
				}
			}
		})
	}
}

// norm drops spaces so the test does not depend on the restorer's spacing.
func norm(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// TestRewriteFencedInOnePass: a rewrite with a fence builds the guarded and
// fenced UPDATE from one parse, with the fence check over the statement's
// own WHERE (neither the guard nor the fence in it).
func TestRewriteFencedInOnePass(t *testing.T) {
	an, err := Analyze("UPDATE sku SET stock = ? WHERE sku_id = ?", "shop")
	if err != nil || len(an.Stmts) != 1 {
		t.Fatal(err)
	}
	spec := RewriteSpec{Column: "stock", Mode: RewriteDelta, Min: "0", Old: []byte("10"), Key: []string{"sku_id"},
		Fence: "fence", FenceToken: 42}
	g, ok, reason, err := RewriteGuarded(an.Stmts[0], spec, []any{int64(9), int64(1001)})
	if err != nil || !ok {
		t.Fatalf("RewriteGuarded: %v %s", err, reason)
	}
	const (
		wantSQL   = "UPDATE `sku` SET `stock`=`stock` - 1, `fence`=42 WHERE ((`sku_id` = 1001) AND `stock` - 1 >= 0) AND `fence` < 42"
		wantFence = "SELECT COUNT(1) FROM `sku` WHERE (`sku_id` = 1001) AND `fence` >= 42"
	)
	if g.SQL != wantSQL || g.FenceCheck != wantFence {
		t.Fatalf("got\n %s\n %s\nwant\n %s\n %s", g.SQL, g.FenceCheck, wantSQL, wantFence)
	}
	if g.Check == "" || strings.Contains(g.Check, "fence") {
		t.Fatalf("the guard's check must not test the fence: %q", g.Check)
	}
	// An UPDATE that assigns the fence column itself is not fenced.
	an, _ = Analyze("UPDATE sku SET stock = 9, fence = 0 WHERE sku_id = 1001", "shop")
	if g, ok, _, err := RewriteGuarded(an.Stmts[0], spec, []any{}); err != nil || !ok || g.FenceCheck != "" || strings.Contains(g.SQL, "42") {
		t.Fatalf("fenced an UPDATE assigning the fence column: %+v %v %v", g, ok, err)
	}
}
