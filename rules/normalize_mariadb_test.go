package rules

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// normCase is one key column type: the rows the table holds and spellings
// of values a client may compare the column with.
type normCase struct {
	table, ddl string // ddl: the column definition of k
	rows       []string
	spellings  []string
}

// numberSpellings are spellings of 1001 (and of its neighbours) MariaDB
// converts through a double or a decimal: every count of fraction digits
// around the 15-17 a double holds and the 38 and 65 a decimal does, quoted
// and not, and exponents down to underflow.
func numberSpellings() []string {
	var out []string
	for _, n := range []int{1, 14, 15, 16, 17, 18, 20, 30, 37, 38, 39, 40, 45, 60, 64, 65, 66, 80} {
		nines, zeros := strings.Repeat("9", n), strings.Repeat("0", n-1)
		for _, v := range []string{"1000." + nines, "1001." + zeros + "1", "1001." + zeros + "0", "1001." + nines} {
			out = append(out, v, "'"+v+"'", "-"+v, "'-"+v+"'")
		}
	}
	return append(out, "'1001e0'", "'1.001e3'", "'10010e-1'", "'1001e-400'", "'1e400'", "'-1e400'", "1001e0", "1.001e3", "100.1e1",
		"1001e-400", "1001.5e0", "1000.9999999999999e0", "1000.99999999999999999e0", "-1001.5e0", "1001.4999999999999e0", "'0.1001e4'", "'1001.'", "'.1001e4'", "'1001e'", "'1001e+0'", "'1001 e1'", "'1001e1x'")
}

var normCases = []normCase{
	{"t_int", "k INT", []string{"0", "1001", "1002", "-5"},
		[]string{"1001", "'1001'", "' 1001'", "'1001.0'", "1001.0", "1001.4", "1e3", "1.001e3", "0x3E9", "'0x3E9'", "'abc'", "''",
			"'1001abc'", "-5", "'-5'", "'+1001'", "1002", "'1002 '", "b'1111101001'", "TRUE", "'\t1001'",
			"_latin1 X'31303031'", "_utf8mb4 0x31303031", "_binary'1001'", "X'31303031'"}},
	{"t_int_num", "k INT", []string{"0", "1000", "1001", "1002", "10010"}, numberSpellings()},
	{"t_bigint_num", "k BIGINT", []string{"0", "1001", "9223372036854775807", "9223372036854775806", "1152921504606846976", "1152921504606846977", "-9223372036854775808"},
		append(numberSpellings(), "9223372036854775807e0", "1152921504606846976e0", "'1152921504606846977'", "1152921504606846977", "-9223372036854775808e0",
			"'9223372036854775807.5'", "9223372036854775806.5", "'9223372036854775808'")},
	{"t_dec_num", "k DECIMAL(30,10)", []string{"0", "1001", "1000.9999999999", "1001.0000000001"}, numberSpellings()},
	{"t_big", "k BIGINT UNSIGNED", []string{"18446744073709551615", "9007199254740993", "9007199254740992", "1"},
		[]string{"18446744073709551615", "9007199254740993", "'9007199254740993'", "9007199254740992", "1", "'1'", "1.0"}},
	{"t_dec", "k DECIMAL(10,2)", []string{"1.10", "2.00", "0"},
		[]string{"1.1", "1.10", "'1.1'", "'1.10'", "1.1e0", "'01.1'", "2", "'2'", "2.0", "0", "'0'", "'abc'", "1.105", "' 2 '"}},
	{"t_general_ci", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", []string{"'abc'", "'ABd'", "'straße'", "'Ærø'", "'e'", "'😀'"},
		[]string{"'abc'", "'ABC'", "'abc '", "'Àbc'", "'abd'", "'strasse'", "'STRASSE'", "'straße'", "'strase'", "'é'", "'E'", "'ærø'", "'aero'", "'😁'", "'abc\t'",
			"_latin1 X'C9'", "_latin1'\xc9'", "X'C3A9'", "_binary'abc'", "'ı'", "'abc\u00a0'"}},
	{"t_unicode_ci", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", []string{"'abc'", "'straße'", "'æble'", "'e'"},
		[]string{"'ABC'", "'strasse'", "'STRASSE'", "'aeble'", "'AEBLE'", "'é'", "'É '", "'abc  '"}},
	{"t_bin", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", []string{"'abc'", "'ABC'"},
		[]string{"'abc'", "'abc  '", "'ABC'", "'Abc'", "x'616263'"}},
	{"t_nopad", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin", []string{"'abc'", "'abc '"},
		[]string{"'abc'", "'abc '", "'abc  '"}},
	{"t_varbinary", "k VARBINARY(32)", []string{"'abc'", "'abc '", "'ABC'"},
		[]string{"'abc'", "'abc '", "x'616263'", "0x61626320", "'ABC'"}},
	{"t_time", "k TIME(6)", []string{"'00:10:01'", "'-00:10:01'", "'26:03:04'", "'00:10:01.5'", "'00:00:00'"},
		[]string{"'00:10:01'", "'0:10:01'", "1001", "-1001", "'-00:10:01'", "'00:10:01.500'", "'26:03:04'", "260304", "0", "'00:00:00'",
			"'10:01'", "'1001'", "1001.5", "'1 02:03:04'"}},
	{"t_datetime", "k DATETIME", []string{"'2024-01-05 12:00:00'", "'2024-01-05 12:00:01'"},
		[]string{"'2024-01-05 12:00:00'", "'2024-01-05 12:00:00.5'", "'2024-01-05 12:00:00.4'", "'2024-01-05 12:00:00.000'", "20240105120000",
			"'2024-01-05 12:00:00.999999'", "'2024-01-05 12:00:01.000001'", "'2024-1-5 12:0:1'", "20240105120001.5",
			"'20240105120000.5'", "'20240105120001.000'", "'2024-02-30 12:00:00'", "'2023-02-29 12:00:00'"}},
	{"t_date", "k DATE", []string{"'2024-01-05'", "'2024-01-06'"},
		[]string{"'2024-01-05'", "'2024-1-5'", "'2024/01/05'", "'20240105'", "20240105", "'2024-01-05 00:00:00'", "'2024-01-05 10:00:00'"}},
}

// TestNormalizeAgreesWithMariaDB asks MariaDB which rows each spelling
// selects and checks that every selected row has the spelling's key: two
// spellings of one row never get two keys. Keys shared by rows MariaDB
// tells apart (lockproxy merging where unsure) are logged, not failed.
func TestNormalizeAgreesWithMariaDB(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ruleList strings.Builder
	for _, c := range normCases {
		testbed.MustExec(t, db, "CREATE TABLE "+c.table+" ("+c.ddl+" PRIMARY KEY)")
		for _, r := range c.rows {
			testbed.MustExec(t, db, "INSERT INTO "+c.table+" VALUES ("+r+")")
		}
		ruleList.WriteString("  - {name: " + c.table + ", table: " + dbName + "." + c.table + ", key: [k]}\n")
	}
	cfg, err := load("norm.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+ruleList.String()), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	for _, c := range normCases {
		t.Run(c.table, func(t *testing.T) {
			col := schema.Table(dbName, c.table).Column("k")
			if col == nil {
				t.Fatalf("no column k in the schema of %s", c.table)
			}
			rowKeys := storedKeys(t, db, c.table, col)
			for _, s := range c.spellings {
				checkSpelling(t, db, c.table, col, s, rowKeys)
			}
		})
	}
}

// storedKeys reads every row back and keys it as a client would spell it.
func storedKeys(t *testing.T, db *sql.DB, table string, col *Column) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT k FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		k, err := Normalize(col, storedValue(col, b), Compare)
		if err != nil {
			t.Fatalf("stored row %q: %v", b, err)
		}
		out[string(b)] = string(k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSpelling(t *testing.T, db *sql.DB, table string, col *Column, spelling string, rowKeys map[string]string) {
	t.Helper()
	query := "SELECT k FROM " + table + " WHERE k = " + spelling
	a, err := parser.Analyze(query, "")
	if err == nil && a.Unparsed {
		t.Logf("%-30s does not parse (refused as unparsed where it names a guarded table)", spelling)
		return
	}
	if err != nil || len(a.Stmts) != 1 {
		t.Fatalf("parse %s: %v", query, err)
	}
	tuples, ok := a.Stmts[0].Tables[0].Where.Keys([]string{"k"})
	if !ok || len(tuples) != 1 {
		t.Fatalf("%s: the parser found no key value", query)
	}
	key, kerr := Normalize(col, tuples[0][0], Compare)
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	selected := map[string]bool{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		selected[string(b)] = true
	}
	if kerr != nil {
		t.Logf("%-30s unkeyed (%v); MariaDB selects %d row(s)", spelling, kerr, len(selected))
		return
	}
	for row := range selected {
		if rowKeys[row] != string(key) {
			t.Errorf("%s: MariaDB selects row %q (key %q) but the spelling's key is %q", spelling, row, rowKeys[row], key)
		}
	}
	for row, rk := range rowKeys {
		if rk == string(key) && !selected[row] {
			t.Logf("%-30s shares key %q with row %q that MariaDB does not select (merged, safe)", spelling, key, row)
		}
	}
}

// TestInsertKeysAgreeWithMariaDB inserts each spelling into an integer and
// a decimal column and checks that the row stored has the key the INSERT
// was given (MySQL rounds 1001.5 into 1002).
func TestInsertKeysAgreeWithMariaDB(t *testing.T) {
	bed := testbed.Get(t)
	db := bed.Open(t, bed.PrimaryAddr, bed.TempDatabase(t))
	// Not strict: MariaDB then stores what it clips, rounds or cuts (with
	// a warning) instead of refusing it, which is what keys must follow.
	db.SetMaxOpenConns(1)
	testbed.MustExec(t, db, "SET SESSION sql_mode = ''")
	cases := []struct {
		ddl       string
		col       *Column
		spellings []string
	}{
		{"k INT", &Column{Name: "k", DataType: "int", ColumnType: "int(11)"},
			[]string{"1001", "'1001'", "1001.5", "1001.4", "-2.5", "'7'", "1e3", "0x10", "99999999999", "-99999999999", "2147483648", "2147483647", "'2147483648'"}},
		{"k INT UNSIGNED", &Column{Name: "k", DataType: "int", ColumnType: "int(10) unsigned", Unsigned: true},
			[]string{"-1", "'-1'", "4294967296", "4294967295", "0"}},
		{"k TINYINT", &Column{Name: "k", DataType: "tinyint", ColumnType: "tinyint(4)"},
			[]string{"127", "128", "-129", "-128", "300"}},
		{"k MEDIUMINT UNSIGNED", &Column{Name: "k", DataType: "mediumint", ColumnType: "mediumint(8) unsigned", Unsigned: true},
			[]string{"16777216", "'16777215.5'", "-0.4", "-0.5", "'-7abc'", "99999999999999999999999"}},
		{"k BIGINT", &Column{Name: "k", DataType: "bigint", ColumnType: "bigint(20)"},
			[]string{"9223372036854775808", "'-9223372036854775809'", "'99999999999abc'", "18446744073709551616", "-99999999999999999999999"}},
		{"k BIGINT UNSIGNED", &Column{Name: "k", DataType: "bigint", ColumnType: "bigint(20) unsigned", Unsigned: true},
			[]string{"18446744073709551616", "'18446744073709551616'", "-1", "'-9223372036854775808'", "18446744073709551615"}},
		{"k DECIMAL(5,5)", &Column{Name: "k", DataType: "decimal", ColumnType: "decimal(5,5)"},
			[]string{"1", "-1", "0.999995", "'0.123456'", "-0.999994"}},
		{"k DECIMAL(3,0) UNSIGNED", &Column{Name: "k", DataType: "decimal", ColumnType: "decimal(3,0) unsigned", Unsigned: true},
			[]string{"1000", "999.5", "'-5'", "998.5"}},
		{"k DATETIME", &Column{Name: "k", DataType: "datetime", ColumnType: "datetime"},
			[]string{"'2024-01-05 12:00:00'", "'2024-01-05 12:00:00.5'", "'2024-01-05 12:00:00.4'", "20240105120000", "'20240105120000.5'", "'2024-02-30 12:00:00'"}},
		{"k DATETIME(3)", &Column{Name: "k", DataType: "datetime", ColumnType: "datetime(3)"},
			[]string{"'2024-01-05 12:00:00.5'", "'2024-01-05 12:00:00.1234'", "'2024-01-05 12:00:00.123'"}},
		{"k DATE", &Column{Name: "k", DataType: "date", ColumnType: "date"},
			[]string{"'2024-01-05'", "'2024-01-05 10:00:00'", "'2024-01-05 00:00:00'", "'2024-01-05 23:59:59.999999'", "20240105235959", "'20240105120000.5'"}},
		{"k DECIMAL(10,2)", &Column{Name: "k", DataType: "decimal", ColumnType: "decimal(10,2)"},
			[]string{"1.1", "'1.10'", "2", "1e1", "1.105", "-1.105", "9.999", "1.104", "'0.005'", "99999999.99", "99999999.995", "100000000", "-99999999.995", "'1e9'"}},
		{"k DECIMAL(10,2) UNSIGNED", &Column{Name: "k", DataType: "decimal", ColumnType: "decimal(10,2) unsigned", Unsigned: true},
			[]string{"1.1", "-1", "'-0.001'", "0"}},
		{"k VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", &Column{Name: "k", DataType: "varchar", Collation: "utf8mb4_general_ci"},
			[]string{"'Abc  '", "1001", "1.50"}},
	}
	for i, c := range cases {
		table := "ins" + string(rune('a'+i))
		testbed.MustExec(t, db, "CREATE TABLE "+table+" ("+c.ddl+")")
		for _, s := range c.spellings {
			ins := "INSERT INTO " + table + " (k) VALUES (" + s + ")"
			a, err := parser.Analyze(ins, "")
			if err != nil || a.Unparsed {
				t.Fatalf("parse %s: %v", ins, err)
			}
			want, err := Normalize(c.col, a.Stmts[0].Insert.Rows[0][0], Assign)
			if err != nil {
				t.Logf("%s: unkeyed (%v)", ins, err)
				continue
			}
			testbed.MustExec(t, db, "DELETE FROM "+table)
			testbed.MustExec(t, db, ins)
			var stored []byte
			if err := db.QueryRow("SELECT k FROM " + table).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			got, err := Normalize(c.col, storedValue(c.col, stored), Compare)
			if err != nil || string(got) != string(want) {
				t.Errorf("%s stores %q (key %q, %v) but the INSERT was keyed %q", ins, stored, got, err, want)
			}
		}
	}
}

// TestLoadSchemaProblems checks that LoadSchema reports a missing table, a
// missing column and a key that is not unique.
func TestLoadSchemaProblems(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	testbed.MustExec(t, db, "CREATE TABLE stock (id INT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(8) COLLATE utf8mb4_general_ci, shelf INT, UNIQUE KEY (sku))")
	// Validation would refuse two keys on one table: LoadSchema must
	// report what it finds anyway, so the config is built by hand.
	cfg := &Config{Rules: []Rule{
		{Name: "ok", Table: dbName + ".stock", Key: []string{"id"}},
		{Name: "unique", Table: dbName + ".STOCK", Key: []string{"SKU"}},
		{Name: "missing", Table: dbName + ".nope", Key: []string{"id"}},
		{Name: "notunique", Table: dbName + ".stock", Key: []string{"shelf", "nocol"}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Path+": "+p.Msg)
	}
	want := []string{
		"rules[2].table: table " + dbName + ".nope does not exist on the primary",
		"rules[3].key: table " + dbName + ".stock has no column nocol",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	info := schema.Table(dbName, "stock")
	if info == nil || !info.Column("id").AutoIncrement || info.Column("sku").Collation != "utf8mb4_general_ci" ||
		!info.IsUniqueKey([]string{"SKU"}) || info.IsUniqueKey([]string{"shelf"}) {
		t.Fatalf("table info: %+v", info)
	}
	cfg.Rules[3].Key = []string{"shelf"}
	_, problems, _ = LoadSchema(ctx, db, cfg)
	if len(problems) != 2 || !strings.Contains(problems[1].Msg, "[shelf] is not a primary or unique key") {
		t.Fatalf("non-unique key: %v", problems)
	}
}

// storedValue is a stored value as a client would write it back: a number
// literal for numeric columns, a string literal otherwise.
func storedValue(col *Column, b []byte) parser.Value {
	switch family(col.DataType) {
	case famInt, famDecimal, famFloat:
		return parser.Value{Kind: parser.ValueDecimal, Str: string(b), Text: string(b)}
	}
	return parser.Value{Kind: parser.ValueString, Str: string(b), Text: string(b)}
}
