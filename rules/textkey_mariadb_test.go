package rules

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
)

// sweepCollations are the collations the text key sweep covers.
var sweepCollations = []string{
	"utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_uca1400_ai_ci", "utf8mb4_uca1400_as_cs",
	"utf8mb4_bin", "utf8mb4_nopad_bin", "latin1_swedish_ci", "latin1_german2_ci",
}

// TestTextKeysSweep puts every character of a collation's character set
// (every BMP code point but the surrogates for utf8mb4, every byte for
// latin1) into a column of that collation, alone, with a trailing space
// and after an 'A', and asks MariaDB which of the values are equal (GROUP
// BY the column). Every group must have one lock key (0 split groups),
// the printable ASCII values' fast keys must be the keys of their server
// weights, and a sample keyed the way statements are (a round trip per
// value) must get the key the sweep computed.
func TestTextKeysSweep(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The sweep's rows are not written to the binary log: the replica
	// needs none of them, and applying them would keep it behind.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("SET SESSION sql_log_bin = 0")
	var ruleList strings.Builder
	for i, c := range sweepCollations {
		cs, _, _ := strings.Cut(c, "_")
		table := fmt.Sprintf("sweep%d", i)
		exec("CREATE TABLE " + table + " (id INT PRIMARY KEY, k VARCHAR(8) CHARACTER SET " + cs + " COLLATE " + c + " NOT NULL, UNIQUE KEY (k, id))")
		char := "CONVERT(CHAR(seq USING utf32) USING utf8mb4)"
		from := "seq_0_to_65535 WHERE seq NOT BETWEEN 55296 AND 57343"
		if cs == "latin1" {
			char, from = "CHAR(seq USING latin1)", "seq_0_to_255"
		}
		exec("INSERT INTO " + table + " SELECT seq, " + char + " FROM " + from)
		exec("INSERT INTO " + table + " SELECT 100000 + seq, CONCAT(" + char + ", ' ') FROM " + from)
		exec("INSERT INTO " + table + " SELECT 200000 + seq, CONCAT('A', " + char + ") FROM " + from)
		ruleList.WriteString("  - {name: " + table + ", table: " + dbName + "." + table + ", key: [id]}\n")
	}
	cfg, err := load("sweep.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+ruleList.String()), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	for _, n := range schema.TextNotes() {
		t.Log(n)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	for i, c := range sweepCollations {
		table := fmt.Sprintf("sweep%d", i)
		t.Run(c, func(t *testing.T) {
			col := schema.Table(dbName, table).Column("k")
			tc := col.text
			if tc == nil || tc.broken != "" {
				t.Fatalf("collation %s not proven: %+v", c, tc)
			}
			if tc.table == nil {
				t.Errorf("collation %s has no fast path: %s", c, tc.why)
			}
			q := "SELECT id, HEX(k)"
			for l := 0; l < tc.levels(); l++ {
				q += ", HEX(WEIGHT_STRING(k" + tc.levelList(l) + "))"
			}
			rows, err := db.QueryContext(ctx, q+" FROM "+table)
			if err != nil {
				t.Fatal(err)
			}
			keys := map[int]string{}
			values := map[int]string{}
			fastChecked := 0
			for rows.Next() {
				var id int
				var raw string
				hexes := make([]string, tc.levels())
				ptrs := []any{&id, &raw}
				for l := range hexes {
					ptrs = append(ptrs, &hexes[l])
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				w := make([][]byte, len(hexes))
				for l, h := range hexes {
					w[l], _ = hex.DecodeString(h)
				}
				k, err := tc.weightsKey(w)
				if err != nil {
					t.Fatalf("row %d: %v", id, err)
				}
				v, _ := hex.DecodeString(raw)
				keys[id], values[id] = k, string(v)
				if asciiOnly(string(v)) {
					fk, ok := tc.fastKey(string(v))
					if !ok || fk != k {
						t.Errorf("%q: fast key %q, the server's weights key it %q", v, fk, k)
					}
					fastChecked++
				}
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
			if fastChecked < 3*95 {
				t.Errorf("checked the fast path on %d values, want at least %d", fastChecked, 3*95)
			}
			groups, err := db.QueryContext(ctx, "SELECT GROUP_CONCAT(id) FROM "+table+" GROUP BY k")
			if err != nil {
				t.Fatal(err)
			}
			split, classes, owner, folded := 0, 0, map[string]int{}, 0
			merged := 0
			for groups.Next() {
				var ids string
				if err := groups.Scan(&ids); err != nil {
					t.Fatal(err)
				}
				classes++
				var first, firstFold string
				foldSplit := false
				for j, s := range strings.Split(ids, ",") {
					var id int
					fmt.Sscan(s, &id)
					fold := collate(c, values[id], false)
					if j == 0 {
						first, firstFold = keys[id], fold
						continue
					}
					if fold != firstFold && !foldSplit {
						foldSplit = true
						folded++
					}
					if keys[id] != first {
						if split < 5 {
							t.Errorf("MariaDB calls %q and the group's first value equal, but their keys are %q and %q", values[id], keys[id], first)
						}
						split++
						break
					}
				}
				if _, dup := owner[first]; dup {
					merged++
				}
				owner[first] = classes
			}
			if err := groups.Close(); err != nil {
				t.Fatal(err)
			}
			if split > 0 {
				t.Errorf("%d of %d groups split", split, classes)
			}
			t.Logf("%s: %d values, %d groups, 0 split, %d merged with another group (folding the literal form in Go, as lockproxy did before asking the server, splits %d)", c, len(keys), classes, merged, folded)

			// Keyed as statements are: one value at a time through the server.
			cs := TextCharsets{Client: tc.charset}
			rnd := rand.New(rand.NewSource(int64(i)))
			ids := make([]int, 0, len(keys))
			for id := range keys {
				ids = append(ids, id)
			}
			for n := 0; n < 300; n++ {
				id := ids[rnd.Intn(len(ids))]
				got, err := NormalizeIn(col, parser.Value{Kind: parser.ValueString, Str: values[id]}, Compare, cs)
				if err != nil {
					t.Errorf("%q: %v", values[id], err)
					continue
				}
				if string(got) != keys[id] {
					t.Errorf("%q: keyed %q one at a time, %q by its stored weights", values[id], got, keys[id])
				}
			}
		})
	}
}

// TestTextKeysClientCharsets keys one value sent in different character
// sets and spellings (latin1 bytes, an introducer, a hex literal, a BLOB
// parameter) and the values the collations join, against what
// MariaDB says of them.
func TestTextKeysClientCharsets(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testbed.MustExec(t, db, "CREATE TABLE u (k VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY)")
	testbed.MustExec(t, db, "CREATE TABLE l (k VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_swedish_ci PRIMARY KEY)")
	testbed.MustExec(t, db, "CREATE TABLE g (k VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_german2_ci PRIMARY KEY)")
	testbed.MustExec(t, db, "CREATE TABLE a (k VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci PRIMARY KEY)")
	testbed.MustExec(t, db, "CREATE TABLE c (k CHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PRIMARY KEY)")
	cfg, err := load("cs.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+
		"  - {name: u, table: "+dbName+".u, key: [k]}\n  - {name: l, table: "+dbName+".l, key: [k]}\n"+
		"  - {name: g, table: "+dbName+".g, key: [k]}\n  - {name: a, table: "+dbName+".a, key: [k]}\n"+
		"  - {name: c, table: "+dbName+".c, key: [k]}\n"), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	utf8 := TextCharsets{}
	latin1 := TextCharsets{Client: "latin1", Connection: "latin1"}
	str := func(s string) parser.Value { return parser.Value{Kind: parser.ValueString, Str: s} }
	key := func(table string, v parser.Value, cs TextCharsets) string {
		t.Helper()
		k, err := NormalizeIn(schema.Table(dbName, table).Column("k"), v, Compare, cs)
		if err != nil {
			t.Fatalf("%s %q: %v", table, v.Str, err)
		}
		return string(k)
	}
	same := []struct {
		table string
		a, b  parser.Value
		acs   TextCharsets
		bcs   TextCharsets
	}{
		{"u", str("jos\xe9"), str("josé"), latin1, utf8},
		{"u", str("jos\xe9"), str("JOSE"), latin1, utf8},
		{"u", parser.Value{Kind: parser.ValueString, Str: "jos\xe9", Charset: "latin1"}, str("jose"), utf8, utf8},
		{"u", parser.Value{Kind: parser.ValueHex, Str: "josé"}, str("jose"), utf8, utf8},
		{"u", parser.Value{Kind: parser.ValueHex, Str: "jos\xe9", Charset: "latin1"}, str("jose"), utf8, utf8},
		{"u", parser.Value{Kind: parser.ValueString, Str: "josé", Charset: "binary"}, str("jose"), utf8, utf8},
		{"u", str("ı"), str("i"), utf8, utf8},
		{"u", str("abc\u00a0"), str("abc\u00a0 "), utf8, utf8},
		{"l", str("ü"), str("y"), utf8, utf8},
		{"l", str("\xfc"), str("Y"), latin1, utf8},
		{"l", str("ð"), str("d"), utf8, utf8},
		{"g", str("ä"), str("ae"), utf8, utf8},
		{"a", str("١٠٠١"), str("1001"), utf8, utf8},
		{"a", str("a\u200b"), str("a"), utf8, utf8},
		{"a", str("e\u0301"), str("é"), utf8, utf8},
	}
	for _, c := range same {
		ka, kb := key(c.table, c.a, c.acs), key(c.table, c.b, c.bcs)
		if ka != kb {
			t.Errorf("%s: %q and %q have keys %q and %q", c.table, c.a.Str, c.b.Str, ka, kb)
		}
		// MariaDB's own answer.
		var eq int
		q := "SELECT CONVERT(_" + charsetOf(c.a, c.acs) + " X'" + hex.EncodeToString([]byte(c.a.Str)) + "' USING " + schema.Table(dbName, c.table).Column("k").text.charset + ") = " +
			"CONVERT(_" + charsetOf(c.b, c.bcs) + " X'" + hex.EncodeToString([]byte(c.b.Str)) + "' USING " + schema.Table(dbName, c.table).Column("k").text.charset + ") COLLATE " +
			schema.Table(dbName, c.table).Column("k").Collation
		if err := db.QueryRowContext(ctx, q).Scan(&eq); err != nil || eq != 1 {
			t.Errorf("%s: MariaDB says %q = %q is %d (%v): the case is wrong", c.table, c.a.Str, c.b.Str, eq, err)
		}
	}
	// A CHAR column stores no trailing spaces, whatever its collation.
	if a, b := key("c", str("josé  "), utf8), key("c", str("josé"), utf8); a != b {
		t.Errorf("CHAR column: 'josé  ' and 'josé' have keys %q and %q", a, b)
	}
	if key("u", str("josé"), utf8) == key("u", str("josf"), utf8) {
		t.Errorf("josé and josf share a key")
	}
	// Not well-formed, or not in the column's character set: refused.
	for _, v := range []struct {
		table string
		v     parser.Value
		cs    TextCharsets
	}{
		{"u", str("jos\xe9"), utf8},
		{"l", str("ĳ"), utf8},
	} {
		if k, err := NormalizeIn(schema.Table(dbName, v.table).Column("k"), v.v, Compare, v.cs); err == nil {
			t.Errorf("%s %q (%+v): keyed %q, want refused", v.table, v.v.Str, v.cs, k)
		}
	}
	// Stored values longer than the column are cut (TestTextKeysCut).
	long, err := NormalizeIn(schema.Table(dbName, "u").Column("k"), str(strings.Repeat("é", 17)), Assign, utf8)
	if cut := key("u", str(strings.Repeat("e", 16)), utf8); err != nil || string(long) != cut {
		t.Errorf("17 characters stored into VARCHAR(16): keyed %q (%v), want the key of the first 16, %q", long, err, cut)
	}
	if _, err := NormalizeIn(schema.Table(dbName, "u").Column("k"), str(strings.Repeat("e", 16)+"  "), Assign, utf8); err != nil {
		t.Errorf("16 characters and trailing spaces stored into VARCHAR(16): %v", err)
	}
}

func charsetOf(v parser.Value, cs TextCharsets) string {
	switch {
	case v.Charset != "":
		return v.Charset
	case v.Kind == parser.ValueHex:
		return "binary"
	}
	return cs.client()
}

// textKeyBench is a proven utf8mb4_general_ci column of a table on the bed
// and a text server for it.
func textKeyBench(b *testing.B) *Column {
	bed := testbed.Get(b)
	dbName := bed.TempDatabase(b)
	db := bed.Open(b, bed.PrimaryAddr, dbName)
	if _, err := db.Exec("CREATE TABLE acct (name VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	cfg, err := load("bench.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n  - {name: acct, table: "+dbName+".acct, key: [name]}\n"), testEnv, "")
	if err != nil {
		b.Fatal(err)
	}
	schema, _, err := LoadSchema(context.Background(), db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	return schema.Table(dbName, "acct").Column("name")
}

// BenchmarkTextKeyASCII keys printable ASCII on the proven fast path.
func BenchmarkTextKeyASCII(b *testing.B) {
	col := textKeyBench(b)
	v := parser.Value{Kind: parser.ValueString, Str: "Alice Smith 1001"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Normalize(col, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextKeyServerCached keys a value outside printable ASCII whose
// weights the server gave before.
func BenchmarkTextKeyServerCached(b *testing.B) {
	col := textKeyBench(b)
	v := parser.Value{Kind: parser.ValueString, Str: "José Müller 1001"}
	if _, err := Normalize(col, v, Compare); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Normalize(col, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextKeyServerFirst keys a new value outside printable ASCII
// every time: a round trip to the primary each.
func BenchmarkTextKeyServerFirst(b *testing.B) {
	col := textKeyBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := parser.Value{Kind: parser.ValueString, Str: fmt.Sprintf("José %d", i)}
		if _, err := Normalize(col, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}
