package rules

import (
	"context"
	"database/sql"
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
)

// TestServerDecimalKeys compares numeric strings past the in-process
// digits with INT, BIGINT UNSIGNED and DECIMAL keys: for each, the rows
// MariaDB selects with key = 'string' must have the string's lock key
// (keyed through the primary's conversion), and stored, the row MariaDB
// writes must have the key lockproxy gives the statement.
func TestServerDecimalKeys(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tables := map[string]string{"i": "INT", "u": "BIGINT UNSIGNED", "d": "DECIMAL(12,3)"}
	var ruleList strings.Builder
	for name, typ := range tables {
		for _, q := range []string{"CREATE TABLE " + name + " (k " + typ + " PRIMARY KEY)",
			"INSERT INTO " + name + " VALUES (0), (1), (1000), (1001), (1002), (999), (12345)"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		ruleList.WriteString("  - {name: " + name + ", table: " + dbName + "." + name + ", key: [k]}\n")
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO d VALUES (1001.5), (1001.501), (0.001)"); err != nil {
		t.Fatal(err)
	}
	cfg, err := load("num.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+ruleList.String()), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	spellings := []string{"1001.0000000000000000000000000000000000000001", "1000.99999999999999999999999999999999999999999",
		"1001e-400", "1001.5000000000000000000000000000000000000004", "1001.50099999999999999999999999999999999999999",
		"0.00000000000000000000000000000000000000049", "-0.00000000000000000000000000000000000000049", "1001.00000000000000001",
		"1001.500499999999999999999999999999999999999", "1001.50050000000000000000000000000000000000001", "0.00049999999999999999999999999999999999999",
		"-0.0005000000000000000000000000000000000000001", "999999999.9995000000000000000000000000000000001", "0." + strings.Repeat("9", 41),
		"1001.5004999999999999999999999999999999999999e0", "10015005000000000000000000000000000000000001e-40", "0." + strings.Repeat("9", 80) + "5"}
	rng := rand.New(rand.NewSource(29))
	for i := 0; i < 60; i++ {
		n := []string{"0", "1", "999", "1000", "1001", "1002", "12345", "1001.5", "1001.501"}[rng.Intn(9)]
		if !strings.Contains(n, ".") {
			n += "."
		}
		tail := strings.Repeat(string("09"[rng.Intn(2)]), 36+rng.Intn(6)) + strconv.Itoa(rng.Intn(10))
		spellings = append(spellings, n+tail, " "+n+tail+"e0", n+tail+"abc")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET sql_mode = ''"); err != nil {
		t.Fatal(err)
	}
	for name, typ := range tables {
		if _, err := conn.ExecContext(ctx, "CREATE TABLE "+name+"_s (k "+typ+")"); err != nil {
			t.Fatal(err)
		}
	}
	keyed, asked, stored := 0, 0, 0
	for name := range tables {
		col := schema.Table(dbName, name).Column("k")
		for _, s := range spellings {
			v := parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}
			key, err := Normalize(col, v, Compare)
			if err != nil {
				if !errors.Is(err, ErrUnkeyable) {
					t.Fatalf("%s = %q: %v", name, s, err)
				}
				continue
			}
			keyed++
			_, inProcess := numberOf(v)
			if inProcess != nil {
				asked++
			}
			again, err := Normalize(col, v, Compare)
			if err != nil || string(again) != string(key) {
				t.Fatalf("%s = %q keyed twice: %q, then %q (%v)", name, s, key, again, err)
			}
			rows, err := db.QueryContext(ctx, "SELECT CAST(k AS CHAR) FROM "+name+" WHERE k = ?", s)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var stored string
				if err := rows.Scan(&stored); err != nil {
					t.Fatal(err)
				}
				rowKey, err := Normalize(col, parser.Value{Kind: parser.ValueString, Str: stored, Text: stored}, Assign)
				if err != nil || string(rowKey) != string(key) {
					t.Errorf("%s = %q: MariaDB selects row %s, keyed %q, but the spelling is keyed %q (%v)", name, s, stored, rowKey, key, err)
				}
			}
			rows.Close()
			if inProcess != nil {
				stored += storedAgrees(t, ctx, conn, col, name, s)
			}
		}
	}
	if asked < len(spellings) {
		t.Errorf("only %d of %d comparisons keyed through the primary's conversion", asked, 3*len(spellings))
	}
	if stored < asked/4 {
		t.Errorf("only %d of %d values past the in-process digits keyed when stored", stored, asked)
	}
	t.Logf("%d of %d comparisons keyed, %d of them through the primary; %d such values keyed stored", keyed, 3*len(spellings), asked, stored)
}

// storedAgrees stores s into a scratch copy of table name's key column
// (under an empty sql_mode, so MariaDB rounds and clips rather than
// refuses) and wants the stored value's key to be the key lockproxy gives
// s stored into col, or lockproxy to refuse s (then only when MariaDB
// clipped it or warned). It returns 1 when s was keyed.
func storedAgrees(t *testing.T, ctx context.Context, conn *sql.Conn, col *Column, name, s string) int {
	t.Helper()
	v := parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}
	key, kerr := Normalize(col, v, Assign)
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+name+"_s VALUES (?)", s); err != nil {
		t.Fatalf("store %q into %s: %v", s, name, err)
	}
	var got string
	if err := conn.QueryRowContext(ctx, "SELECT CAST(k AS CHAR) FROM "+name+"_s").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+name+"_s"); err != nil {
		t.Fatal(err)
	}
	if kerr != nil {
		if !errors.Is(kerr, ErrUnkeyable) {
			t.Fatalf("%q stored into %s: %v", s, name, kerr)
		}
		return 0
	}
	rowKey, err := Normalize(col, parser.Value{Kind: parser.ValueString, Str: got, Text: got}, Assign)
	if err != nil || string(rowKey) != string(key) {
		t.Errorf("%q stored into %s: MariaDB stores %s, keyed %q, but lockproxy keys the statement %q (%v)", s, name, got, rowKey, key, err)
	}
	return 1
}

// numberKeyBench is a BIGINT column of a table on the bed, with the
// primary to ask.
func numberKeyBench(b *testing.B) *Column {
	bed := testbed.Get(b)
	dbName := bed.TempDatabase(b)
	db := bed.Open(b, bed.PrimaryAddr, dbName)
	if _, err := db.Exec("CREATE TABLE sku (sku_id BIGINT PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	cfg, err := load("bench.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n  - {name: sku, table: "+dbName+".sku, key: [sku_id]}\n"), testEnv, "")
	if err != nil {
		b.Fatal(err)
	}
	schema, _, err := LoadSchema(context.Background(), db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return schema.WithTextServer(NewTextServer(db)).Table(dbName, "sku").Column("sku_id")
}

// BenchmarkNumberKeyString keys '1001.0' on an integer column in process.
func BenchmarkNumberKeyString(b *testing.B) {
	col := numberKeyBench(b)
	v := parser.Value{Kind: parser.ValueString, Str: "1001.0"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Normalize(col, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNumberKeyServerCached keys a string past 38 fraction digits
// whose conversion the primary gave before.
func BenchmarkNumberKeyServerCached(b *testing.B) {
	col := numberKeyBench(b)
	v := parser.Value{Kind: parser.ValueString, Str: "1001." + strings.Repeat("0", 40) + "1"}
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

// BenchmarkNumberKeyServerFirst keys a new string past 38 fraction
// digits every time: a round trip to the primary each.
func BenchmarkNumberKeyServerFirst(b *testing.B) {
	col := numberKeyBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := parser.Value{Kind: parser.ValueString, Str: strconv.Itoa(i) + "." + strings.Repeat("0", 40) + "1"}
		if _, err := Normalize(col, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}
