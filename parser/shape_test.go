package parser

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

func TestShapeOf(t *testing.T) {
	iv := func(n int64) Value { return Value{Kind: ValueInt, Int: n, Text: strconv.FormatInt(n, 10)} }
	sv := func(s string) Value { return Value{Kind: ValueString, Str: s, Text: quoteString(s)} }
	for _, tt := range []struct {
		sql, shape string
		vals       []Value
	}{
		{"UPDATE sku_stock SET stock = 41 WHERE sku_id = 7", "UPDATE sku_stock SET stock = ? WHERE sku_id = ?", []Value{iv(41), iv(7)}},
		{"SELECT c FROM sbtest1 WHERE id=5023", "SELECT c FROM sbtest1 WHERE id=?", []Value{iv(5023)}},
		{"select * from t where a=007 and b ='x=1' and `c=2`=3", "select * from t where a=? and b =? and `c=2`=?", []Value{iv(7), sv("x=1"), iv(3)}},
		{"DELETE FROM t WHERE id = 1 LIMIT 1", "DELETE FROM t WHERE id = ? LIMIT 1", []Value{iv(1)}},
		{"UPDATE t SET a = 1, b=2 WHERE k=3", "UPDATE t SET a = ?, b=? WHERE k=?", []Value{iv(1), iv(2), iv(3)}},
		{"SELECT * FROM t WHERE id = 123456789012345678", "SELECT * FROM t WHERE id = ?", []Value{iv(123456789012345678)}},
		// Plain strings: their bytes are their value.
		{"UPDATE inventory SET stock = stock - 1 WHERE sku = 'A-1001'", "UPDATE inventory SET stock = stock - 1 WHERE sku = ?", []Value{sv("A-1001")}},
		{"SELECT * FROM t WHERE s = '' AND n = 'x y ' AND q='\"?;'", "SELECT * FROM t WHERE s = ? AND n = ? AND q=?", []Value{sv(""), sv("x y "), sv(`"?;`)}},
		{"UPDATE t SET note = 'paid' WHERE code='AB'", "UPDATE t SET note = ? WHERE code=?", []Value{sv("paid"), sv("AB")}},
		{"SELECT s = 'a' collated FROM t", "SELECT s = ? collated FROM t", []Value{sv("a")}}, // an alias, not COLLATE
		// Range reads: both bounds of BETWEEN, when nothing can extend hi.
		{"SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111", "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", []Value{iv(5012), iv(5111)}},
		{"SELECT DISTINCT c FROM sbtest1 WHERE id between 1\tand 0100 ORDER BY c", "SELECT DISTINCT c FROM sbtest1 WHERE id between ?\tand ? ORDER BY c", []Value{iv(1), iv(100)}},
		{"SELECT * FROM t WHERE (a NOT BETWEEN 1 AND 2) AND b = 3 FOR UPDATE", "SELECT * FROM t WHERE (a NOT BETWEEN ? AND ?) AND b = ? FOR UPDATE", []Value{iv(1), iv(2), iv(3)}},
		{"DELETE FROM t WHERE k BETWEEN 7 AND 9 OR k = 1 LIMIT 5", "DELETE FROM t WHERE k BETWEEN ? AND ? OR k = ? LIMIT 5", []Value{iv(7), iv(9), iv(1)}},
		// The elements of an INSERT's or REPLACE's VALUES rows that are a
		// digit run or a plain string alone between the row's commas.
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5012, 4993, '68487-96439', '22195')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)", []Value{iv(5012), iv(4993), sv("68487-96439"), sv("22195")}},
		{"insert into t values(1,'a') , ( 2 ,'b' )", "insert into t values(?,?) , ( ? ,? )", []Value{iv(1), sv("a"), iv(2), sv("b")}},
		{"REPLACE t VALUE (7)", "REPLACE t VALUE (?)", []Value{iv(7)}},
		{"INSERT INTO t VALUES (1) RETURNING 2, 3", "INSERT INTO t VALUES (?) RETURNING 2, 3", []Value{iv(1)}},
		{"INSERT IGNORE INTO t (a, b) VALUES (1, NOW()), (DEFAULT, 2)", "INSERT IGNORE INTO t (a, b) VALUES (?, NOW()), (DEFAULT, ?)", []Value{iv(1), iv(2)}},
		{"INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = VALUES(b), c = 3",
			"INSERT INTO t (a, b) VALUES (?, ?) ON DUPLICATE KEY UPDATE b = VALUES(b), c = ?", []Value{iv(1), iv(2), iv(3)}},
		{"INSERT INTO t (a) VALUES (f(1), 2, -3, 4 + 5, 6 + 7, 'a' 'b', 'x' COLLATE y, (8), 09, 1.5, .5, 1e5, NULL, 'it''s', x'41', _latin1'z')",
			"INSERT INTO t (a) VALUES (f(1), ?, -3, 4 + 5, 6 + 7, 'a' 'b', 'x' COLLATE y, (8), ?, 1.5, .5, 1e5, NULL, 'it''s', x'41', _latin1'z')", []Value{iv(2), iv(9)}},
	} {
		shape, vals, ok := shapeOf(tt.sql)
		if !ok || shape != tt.shape || len(vals) != len(tt.vals) {
			t.Errorf("shapeOf(%q) = %q, %v, %v; want %q, %v", tt.sql, shape, vals, ok, tt.shape, tt.vals)
			continue
		}
		for i, v := range vals {
			if v != tt.vals[i] {
				t.Errorf("shapeOf(%q) value %d = %+v, want %+v", tt.sql, i, v, tt.vals[i])
			}
		}
	}
	// Strings not shaped (the text may still be shaped by an integer):
	// an introducer or N, a doubled quote, a string next to it, COLLATE,
	// bytes outside printable ASCII, another operator than a lone `=`.
	// A backslash inside a string (an escape under the default sql_mode)
	// keeps that string a literal, whatever else is shaped.
	if shape, vals, ok := shapeOf(`SELECT * FROM t WHERE s = 'a\\' AND id = 5`); !ok || len(vals) != 1 || vals[0] != iv(5) ||
		shape != `SELECT * FROM t WHERE s = 'a\\' AND id = ?` {
		t.Errorf("string with a backslash: shapeOf = %q, %v, %v; want only the integer shaped", shape, vals, ok)
	}
	for _, sql := range []string{
		"SELECT * FROM t WHERE s = _utf8mb4'x'", "SELECT * FROM t WHERE s = _latin1 'x'", "SELECT * FROM t WHERE s = N'x'",
		"SELECT * FROM t WHERE s = 'it''s'", "SELECT * FROM t WHERE s = 'a' 'b'", "SELECT * FROM t WHERE s = 'a'\n'b'",
		"SELECT * FROM t WHERE s = 'a' COLLATE utf8mb4_bin", "SELECT * FROM t WHERE s = 'a'collate latin1_bin",
		"SELECT * FROM t WHERE s = 'caf\xc3\xa9'", "SELECT * FROM t WHERE s = 'a\tb'", "SELECT * FROM t WHERE s >= 'a'",
		"SELECT * FROM t WHERE s <=> 'a'", "SELECT * FROM t WHERE s IN ('a')", "SELECT * FROM t WHERE s = x'41'",
		"SELECT * FROM t WHERE s = b'1'", "SELECT * FROM t WHERE s = @x := 'a'", "SELECT * FROM t WHERE s := 'a'",
	} {
		if shape, vals, ok := shapeOf(sql); ok {
			t.Errorf("shapeOf(%q) = %q, %v; want the string left alone", sql, shape, vals)
		}
	}
	// Texts left alone: nothing to shape, or not read with certainty.
	for _, sql := range []string{
		"BEGIN", "SELECT 1", "SELECT * FROM t WHERE id IN (1, 2)", "SELECT * FROM t LIMIT 5",
		"SELECT * FROM t WHERE id >= 5", "SELECT * FROM t WHERE id <= 5", "SELECT * FROM t WHERE id != 5",
		"SELECT * FROM t WHERE id <=> 5", "SELECT * FROM t WHERE id = -5", "SELECT * FROM t WHERE id = +5",
		"SELECT * FROM t WHERE id = 5.0", "SELECT * FROM t WHERE id = 5e3", "SELECT * FROM t WHERE id = 0x1f",
		"SELECT * FROM t WHERE id = 1234567890123456789", "SELECT * FROM t WHERE t.id = t.1",
		"SELECT * FROM t WHERE id = 5 -- x", "SELECT * FROM t WHERE id = 5 # x", "SELECT /*+ x */ * FROM t WHERE id = 5",
		"SELECT * FROM t WHERE id = 5 /*!100100 OR 1=1 */", "SELECT * FROM t WHERE id = ?", "SELECT * FROM t WHERE id = 5 AND s = 'a\\'=1'",
		"SELECT * FROM t WHERE id = @v := 5", "SELECT * FROM t WHERE id = 5 INTO @x", `SELECT * FROM t WHERE "a" = 5`,
		"SELECT * FROM t WHERE s = 'unterminated = 5", "SELECT * FROM t WHERE id = 5a",
		// BETWEEN pairs that are not shaped: equal bounds (keyed as e = k),
		// a bound that is not a plain digit run, something that extends
		// hi, something other than blanks between the bounds and AND.
		"SELECT * FROM t WHERE id BETWEEN 5 AND 5", "SELECT * FROM t WHERE id BETWEEN 5 AND 05",
		"SELECT * FROM t WHERE id BETWEEN -5 AND 5", "SELECT * FROM t WHERE id BETWEEN 5 AND -1",
		"SELECT * FROM t WHERE id BETWEEN 1.5 AND 5", "SELECT * FROM t WHERE id BETWEEN 1 AND 5.5",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 5 + 1", "SELECT * FROM t WHERE id BETWEEN 1 + 1 AND 5",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 5 IS TRUE", "SELECT * FROM t WHERE id BETWEEN 1 AND 5 COLLATE x",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 5 DIV 2", "SELECT * FROM t WHERE id BETWEEN 1 AND 5 || 1",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 0x5", "SELECT * FROM t WHERE id BETWEEN 1 AND 5e1",
		"SELECT * FROM t WHERE id BETWEEN 1 && 5", "SELECT * FROM t WHERE id BETWEEN '1' AND '5'",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 1234567890123456789", "SELECT * FROM t WHERE id BETWEEN 1 /* x */ AND 5",
		"SELECT * FROM t WHERE id BETWEEN 1 AND 5;", "SELECT * FROM t WHERE id BETWEEN @a AND 5",
		"SELECT * FROM t WHERE id BETWEENX 1 AND 5", "SELECT * FROM t WHERE id BETWEEN 1 ANDY 5",
		// Rows that are not an INSERT's or REPLACE's own VALUES, and
		// elements that are not alone between a row's commas.
		"SELECT * FROM t WHERE (a, b) IN ((1, 2))", "SELECT f(1, 2) FROM t", "VALUES (1, 2)",
		"INSERT INTO t SELECT * FROM (VALUES (1, 2)) v", "INSERT INTO t (a) SELECT 1", "INSERT INTO t (a) SELECT a FROM u LIMIT 1, 2",
		"INSERT INTO t VALUES ((1), -2, 3 + 4, 'a' 'b')", "INSERT INTO t VALUES (1 /* x */)", "UPDATE t SET a = f(1, 2)",
		"INSERT INTO t VALUES (@a, 1 := 2)", "CALL p(1, 2)",
		"INSERT INTO t VALUES (12345678901234567890)", "INSERT INTO t VALUES ('\\')", "EXPLAIN INSERT INTO t VALUES (1)",
	} {
		if shape, vals, ok := shapeOf(sql); ok {
			t.Errorf("shapeOf(%q) = %q, %v; want it left alone", sql, shape, vals)
		}
	}
}

// TestShapeStandsForItsTexts: the hot statements of a shop get a usable
// shape whose analysis, bound, matches each text's own; shapes whose
// placeholders would change the analysis are refused.
func TestShapeStandsForItsTexts(t *testing.T) {
	c := NewCache(64)
	for _, sql := range []string{
		"UPDATE sku_stock SET stock = 41 WHERE sku_id = 7",
		"SELECT stock FROM sku_stock WHERE sku_id = 7 FOR UPDATE",
		"SELECT c FROM sbtest1 WHERE id=5023",
		"DELETE FROM orders WHERE order_id = 9",
		"INSERT INTO orders SET order_id = 5, sku_id = 7",
		"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 7 AND stock >= 1",
		"UPDATE inventory SET stock = stock - 1 WHERE sku = 'A-1001'",
		"SELECT stock FROM inventory WHERE sku = 'A-1001' AND warehouse = 3 FOR UPDATE",
		"UPDATE orders SET state = 'paid', paid_by = 'card' WHERE order_no = 'O-77'",
		"DELETE FROM carts WHERE user_id = 9 AND sku = 'B 2 '",
		// sysbench oltp_read_write's range reads
		"SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111",
		"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5012 AND 5111",
		"SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111 ORDER BY c",
		"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111 ORDER BY c",
		"SELECT stock FROM sku_stock WHERE sku_id BETWEEN 5 AND 9 FOR UPDATE",
		// sysbench oltp_read_write's INSERT, and rows as shops write them
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5012, 4993, '68487932199-96439406143', '22195207048-70116052123')",
		"INSERT INTO orders (order_id, sku_id, qty) VALUES (5, 7, 1), (6, 7, 2)",
		"INSERT INTO sku_stock VALUES (7, 100)",
		"REPLACE INTO sku_stock (sku_id, stock) VALUES (7, 100)",
		"INSERT INTO sku_stock (sku_id, stock) VALUES (7, 1) ON DUPLICATE KEY UPDATE stock = stock + 1",
		"INSERT IGNORE INTO inventory (sku, warehouse, stock) VALUES ('A-1001', 3, 0)",
	} {
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil || params == nil {
			t.Errorf("%s: params %v, err %v: want the shape", sql, params, err)
			continue
		}
		lit, err := Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if !sameUnderParams(an, lit, boundValues(params)) {
			t.Errorf("%s: shape analysis differs from the text's", sql)
		}
	}
	for _, sql := range []string{
		"SELECT a FROM t WHERE b = 1 ORDER BY 1",  // still shaped: ORDER BY 1 is not after '='
		"SELECT a = 1 FROM t",                     // a comparison as a column: kept as an expression's text
		"UPDATE t SET a = 5 + b WHERE id = 1",     // a literal inside an expression
		"SET @@session.max_statement_time = 5",    // not a DML statement
		"SELECT * FROM t WHERE id = 1 AND id = 1", // two constraints merge on the literal text
	} {
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		if params != nil {
			lit, _ := Analyze(sql, "shop")
			if !sameUnderParams(an, lit, boundValues(params)) {
				t.Errorf("%s: a shape was used whose analysis differs", sql)
			}
			continue
		}
		if an.SQL != sql {
			t.Errorf("%s: without a shape the text's own analysis is returned, got %q", sql, an.SQL)
		}
	}
}

// TestShapeOfStringsOnlyForPlainOnes: once a shape is established by a
// plain string, texts of the same statement whose string is anything but
// plain (escapes, doubled quotes, introducers, COLLATE, concatenation,
// bytes beyond ASCII, hex) are never answered by it with another value
// than their own: each is either analysed from its text or matches its
// own analysis once bound.
func TestShapeOfStringsOnlyForPlainOnes(t *testing.T) {
	c := NewCache(64)
	const pre, post = "UPDATE inventory SET stock = stock - 1 WHERE sku = ", " AND warehouse = 3"
	if _, params, err := c.AnalyzeShaped(pre+"'A-0'"+post, "shop", DefaultOptions); err != nil || params == nil {
		t.Fatalf("plain string: params %v, err %v; want the shape", params, err)
	}
	for _, lit := range []string{
		`'a\\'`, `'a\'b'`, `'it''s'`, `_utf8mb4'x'`, `_latin1 'x'`, `N'x'`, `'x' COLLATE utf8mb4_bin`,
		`'a' 'b'`, "'caf\xc3\xa9'", `x'41'`, `'a\nb'`, `'\%'`, `'\_'`, `''''`,
	} {
		sql := pre + lit + post
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		own, err := Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if params == nil {
			if an.SQL != sql {
				t.Errorf("%s: analysed as %q", sql, an.SQL)
			}
			continue
		}
		if !sameUnderParams(an, own, boundValues(params)) {
			t.Errorf("%s: answered by a shape that binds %v, which is not the text's own value", sql, params)
		}
	}
}

// TestShapeRefusedWhereItWouldDiffer: shapes the first text shows to
// differ are refused, and later texts of that shape get their own
// analysis.
func TestShapeRefusedWhereItWouldDiffer(t *testing.T) {
	c := NewCache(64)
	for _, sql := range []string{"UPDATE t SET a = 5 + b WHERE id = 1", "UPDATE t SET a = 6 + b WHERE id = 2"} {
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		if params != nil || an.SQL != sql {
			t.Fatalf("%s: shape used (params %v, SQL %q)", sql, params, an.SQL)
		}
	}
}

// TestShapeKeepsBetweenKeys: a BETWEEN whose bounds are equal is keyed
// as e = k, which the shape of a range (placeholders for both bounds)
// cannot be: once a range has established the shape, a text with equal
// bounds is still analysed from its own text, and keys its row.
func TestShapeKeepsBetweenKeys(t *testing.T) {
	c := NewCache(64)
	const pre = "SELECT stock FROM sku_stock WHERE sku_id BETWEEN "
	if _, params, err := c.AnalyzeShaped(pre+"5 AND 9 FOR UPDATE", "shop", DefaultOptions); err != nil || params == nil {
		t.Fatalf("a range: params %v, err %v; want the shape", params, err)
	}
	for _, bounds := range []string{"7 AND 7", "07 AND 7", "7 AND 0007"} {
		sql := pre + bounds + " FOR UPDATE"
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		own, err := Analyze(sql, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if params != nil && !sameUnderParams(an, own, boundValues(params)) {
			t.Errorf("%s: answered by the range's shape (params %v), which differs from its own analysis", sql, params)
		}
	}
	// The text's own analysis keys the row (so the shape would lose it).
	own, err := Analyze(pre+"7 AND 7 FOR UPDATE", "shop")
	if err != nil {
		t.Fatal(err)
	}
	ranged, err := Analyze(pre+"5 AND 9 FOR UPDATE", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(own.Stmts[0].Tables[0].Where, ranged.Stmts[0].Tables[0].Where) {
		t.Fatal("BETWEEN 7 AND 7 and BETWEEN 5 AND 9 analyse alike: the test no longer shows what it guards")
	}
}

var placeholder = regexp.MustCompile(`\?`)

// FuzzShape: for any text a shape is used for, the shape's analysis bound
// to another text of the same shape (its digits changed) matches that
// text's own analysis. The first text decides whether a shape is used;
// this checks that the decision holds for the values that come after.
func FuzzShape(f *testing.F) {
	for _, s := range []string{
		"UPDATE sku_stock SET stock = 41 WHERE sku_id = 7",
		"SELECT stock FROM sku_stock WHERE sku_id = 7 AND stock = 3 FOR UPDATE",
		"DELETE FROM t WHERE a = 1 AND (b = 2 OR c = 3)",
		"INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = 3",
		"SELECT * FROM t WHERE a = 1 AND a = 2",
		"UPDATE t SET a = 1 WHERE b = 1 ORDER BY c LIMIT 1",
		"SELECT * FROM t JOIN u ON t.a = u.b WHERE t.a = 5",
		"SELECT * FROM t WHERE (a, b) = (1, 2)",
		"SELECT * FROM t WHERE a = 0",
		"SELECT * FROM t WHERE a = 9223372036854775",
		"UPDATE inventory SET stock = stock - 1 WHERE sku = 'A-1001'",
		"UPDATE t SET s = 'x', n = 5 WHERE k = 'y' AND j = 2",
		"SELECT * FROM t WHERE s = '' AND u = ' '",
		"INSERT INTO t SET a = 'x', b = 1",
		"SELECT * FROM t WHERE (a, b) = ('x', 'y')",
		"SELECT * FROM t WHERE a = 'x' AND a = 'x'",
		"SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111 ORDER BY c",
		"SELECT * FROM t WHERE a BETWEEN 1 AND 2 AND b = 3 FOR UPDATE",
		"UPDATE t SET a = 1 WHERE k NOT BETWEEN 4 AND 9",
		"SELECT * FROM t WHERE (k BETWEEN 1 AND 5) OR k = 3",
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5012, 4993, '68487932199-96439406143', '22195207048')",
		"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)",
		"REPLACE INTO t (k, v) VALUE (1, 2)",
		"INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = VALUES(b) + 3",
		"INSERT INTO t (a, b) VALUES (1, f(2)), (3, 4 + 5)",
	} {
		f.Add(s, uint64(1))
	}
	for i, c := range readCorpus(f) {
		if c.DB == "shop" {
			f.Add(c.SQL, uint64(i))
		}
	}
	f.Fuzz(func(t *testing.T, sql string, seed uint64) {
		if len(sql) > 2000 {
			return
		}
		c := NewCache(16)
		an, params, err := c.AnalyzeShaped(sql, "shop", DefaultOptions)
		if err != nil || params == nil {
			return
		}
		shape, vals, _ := shapeOf(sql)
		// Another text of the same shape: new digits or a new string where
		// the shape has '?'. An integer never repeats the one before it:
		// the two bounds of a shaped BETWEEN differ (betweenPair).
		r := rand.New(rand.NewPCG(seed, 7))
		other := ""
		parts := placeholder.Split(shape, -1)
		prevInt := int64(-1)
		for i, p := range parts {
			other += p
			if i < len(parts)-1 {
				if vals[i].Kind == ValueString {
					other += quoteString(randomShapeString(r))
				} else {
					n := r.Int64N(1_000_000) * int64(1+r.IntN(3))
					if n == prevInt {
						n++
					}
					prevInt = n
					other += strconv.FormatInt(n, 10)
				}
			}
		}
		if o, _, ok := shapeOf(other); !ok || o != shape {
			t.Fatalf("%q does not shape like %q", other, sql)
		}
		an2, params2, err := c.AnalyzeShaped(other, "shop", DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		if an2 != an || params2 == nil {
			t.Fatalf("%q: shape not reused", other)
		}
		lit, err := Analyze(other, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if !sameUnderParams(an2, lit, boundValues(params2)) {
			t.Fatalf("shape of %q stands for %q, but the analyses differ:\nshape %s\ntext  %s", sql, other, dump(an2), dump(lit))
		}
	})
}

// randomShapeString is a string a shape may hold: printable ASCII, no
// quote or backslash; sometimes empty, sometimes a number or with
// trailing spaces.
func randomShapeString(r *rand.Rand) string {
	const chars = "abcXYZ019 -_.,;:?=()*%\"<>@#/!"
	switch r.IntN(6) {
	case 0:
		return ""
	case 1:
		return strconv.Itoa(r.IntN(100000))
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	if r.IntN(4) == 0 {
		return string(b) + "  "
	}
	return string(b)
}

func dump(a *Analysis) string {
	s := ""
	for _, f := range a.Stmts {
		g := *f
		g.Node = nil
		s += fmt.Sprintf("%+v", g)
	}
	return s
}

// boundValues are the Values params binds (AnalyzeShaped's parameters).
func boundValues(params []any) []Value {
	vals := make([]Value, len(params))
	for i, p := range params {
		vals[i] = p.(Value)
	}
	return vals
}
