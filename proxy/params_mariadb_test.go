package proxy

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// paramCase is one binary parameter and the key lockproxy must give it:
// the exact key, "*" for any key (the differential check alone decides),
// or "" when lockproxy must refuse it.
type paramCase struct {
	p   typedParam
	key string
}

// paramColumn is one key column type: the rows its table holds and the
// parameters compared with it.
type paramColumn struct {
	table, ddl string
	rows       []string // SQL literals
	cases      []paramCase
}

const (
	tInt      = mysql.MYSQL_TYPE_LONG
	tLonglong = mysql.MYSQL_TYPE_LONGLONG
	tDate     = mysql.MYSQL_TYPE_DATE
	tDatetime = mysql.MYSQL_TYPE_DATETIME
	tVarStr   = mysql.MYSQL_TYPE_VAR_STRING
	tBlob     = mysql.MYSQL_TYPE_BLOB
	tNewDec   = mysql.MYSQL_TYPE_NEWDECIMAL
)

func paramColumns() []paramColumn {
	time1001 := wireTime(false, 0, 0, 10, 1, 0)
	date0105 := wireDate(tDate, 2024, 1, 5, 0, 0, 0, 0)
	dt0105 := wireDate(tDatetime, 2024, 1, 5, 0, 10, 1, 0)
	return []paramColumn{
		{"p_int", "k INT", []string{"0", "7", "1001", "-1001", "1060", "101001001", "1231001001", "20240105", "240105", "-5"}, []paramCase{
			{wireInt(tLonglong, 1001), "1001"}, {wireInt(tInt, 1001), "1001"}, {wireInt(mysql.MYSQL_TYPE_TINY, -5), "-5"},
			{wireUint(mysql.MYSQL_TYPE_SHORT, 1001), "1001"}, {wireUint(tLonglong, math.MaxUint64), "18446744073709551615"},
			{wireUint(mysql.MYSQL_TYPE_TINY, 251), "251"},
			{time1001, ""}, {wireTime(false, 0, 0, 0, 0, 0), ""}, {date0105, ""}, {dt0105, ""},
			{wireDouble(1001), "1001"}, {wireDouble(1001.5), "1001.5"}, {wireFloat(1001), "1001"}, {wireDouble(1e300), ""},
			{wireDouble(math.Inf(1)), ""},
			{wireText(tNewDec, "1001.0"), "1001"}, {wireText(mysql.MYSQL_TYPE_DECIMAL, "1001.5"), "1001.5"}, {wireText(tNewDec, " 1001"), ""},
			{wireText(tNewDec, "1e3"), ""},
			{wireText(tVarStr, "1001"), "1001"}, {wireText(mysql.MYSQL_TYPE_STRING, "1001abc"), "1001"}, {wireText(tVarStr, "abc"), "0"},
			{wireText(tBlob, "1001"), "1001"}, {wireText(mysql.MYSQL_TYPE_ENUM, "1001"), "1001"}, {wireText(mysql.MYSQL_TYPE_VARCHAR, " 7"), "7"},
			{wireNull(), ""}, {wireInt(mysql.MYSQL_TYPE_YEAR, 1001), ""}, {wireInt(mysql.MYSQL_TYPE_INT24, 1001), ""},
			{wireText(mysql.MYSQL_TYPE_BIT, "1001"), ""}, {wireText(mysql.MYSQL_TYPE_JSON, "1001"), ""},
		}},
		{"p_big", "k BIGINT", []string{"0", "1001", "-1001", "1002", "260304", "20240105", "240105", "20240105001001", "240105001001", "101001001", "9007199254740993", "9007199254740992"}, []paramCase{
			{time1001, "1001"}, {wireTime(true, 0, 0, 10, 1, 0), "-1001"}, {wireTime(false, 0, 0, 0, 0, 0), "0"},
			{wireTime(false, 0, 0, 10, 1, 500000), "1001.5"}, {wireTime(false, 1, 2, 3, 4, 0), "260304"}, {wireTime(false, 0, 26, 3, 4, 0), "260304"},
			{wireTime(false, 40, 0, 0, 0, 0), ""},
			{date0105, "20240105"}, {dt0105, "20240105001001"}, {wireDate(mysql.MYSQL_TYPE_TIMESTAMP, 2024, 1, 5, 0, 10, 1, 0), "20240105001001"},
			{wireDate(tDatetime, 2024, 1, 5, 0, 10, 1, 500000), "20240105001001.5"}, {wireDate(tDate, 2024, 2, 30, 0, 0, 0, 0), ""},
			{wireDate(tDatetime, 2024, 1, 5, 0, 0, 0, 0), "20240105000000"},
			{wireInt(tLonglong, 9007199254740993), "9007199254740993"}, {wireDouble(9007199254740992), ""},
			{wireText(tVarStr, "9007199254740993"), ""}, {wireText(tNewDec, "9007199254740993"), "9007199254740993"},
		}},
		{"p_ubig", "k BIGINT UNSIGNED", []string{"1001", "18446744073709551615", "20240105", "0"}, []paramCase{
			{wireUint(tLonglong, math.MaxUint64), "18446744073709551615"}, {wireInt(tLonglong, -1), "-1"},
			{time1001, "1001"}, {wireTime(true, 0, 0, 10, 1, 0), "-1001"}, {date0105, "20240105"}, {wireTime(false, 0, 0, 0, 0, 0), "0"},
		}},
		{"p_dec", "k DECIMAL(10,2)", []string{"1.10", "2.00", "0", "1001"}, []paramCase{
			{wireText(tNewDec, "1.1"), "1.1"}, {wireText(tNewDec, "1.10"), "1.1"}, {wireDouble(1.1), "1.1"},
			{wireFloat(1.1), "1.100000023841858"}, {wireInt(tLonglong, 2), "2"}, {wireText(tVarStr, "1.1"), "1.1"},
			{time1001, ""}, {date0105, ""}, {wireText(tNewDec, "-0.0"), "0"},
		}},
		{"p_dec30", "k DECIMAL(30,20)", []string{"0.1", "0.10000000000000000001"}, []paramCase{
			{wireDouble(0.1), ""}, {wireText(tNewDec, "0.1"), "0.1"}, {wireText(tNewDec, "0.10000000000000000001"), "0.10000000000000000001"},
		}},
		{"p_ci", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", []string{"'abc'", "'ABd'", "'1001'", "'1001.0'", "'2024-01-05'", "'00:10:01'", "'straße'"}, []paramCase{
			{wireText(tVarStr, "ABC"), "*"}, {wireText(tVarStr, "abc  "), "*"}, {wireText(tBlob, "ABC"), "*"}, {wireText(tBlob, "abd"), "*"},
			{wireText(mysql.MYSQL_TYPE_STRING, "STRASSE"), "*"}, {wireText(tBlob, "STRAßE"), "*"},
			{wireInt(tLonglong, 1001), ""}, {wireDouble(1001), ""}, {wireText(tNewDec, "1001"), ""},
			{date0105, ""}, {time1001, ""},
		}},
		{"p_bin", "k VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", []string{"'abc'", "'ABC'"}, []paramCase{
			{wireText(tVarStr, "abc"), "*"}, {wireText(tVarStr, "abc "), "*"}, {wireText(tBlob, "ABC"), "*"}, {wireText(tBlob, "abc  "), "*"},
			{wireInt(tLonglong, 0), ""},
		}},
		{"p_varbinary", "k VARBINARY(16)", []string{"'abc'", "'abc '", "'ABC'"}, []paramCase{
			{wireText(tVarStr, "abc"), "*"}, {wireText(tBlob, "abc "), "*"}, {wireText(tVarStr, "ABC"), "*"}, {wireInt(tLonglong, 1), ""},
		}},
		{"p_binary", "k BINARY(4)", []string{"'ab'", "'abcd'"}, []paramCase{
			{wireText(tVarStr, "ab"), "*"}, {wireText(tBlob, "ab\x00\x00"), "*"}, {wireText(tBlob, "abcd"), "*"},
		}},
		{"p_date", "k DATE", []string{"'2024-01-05'", "'2024-01-06'"}, []paramCase{
			{date0105, "2024-01-05 00:00:00"}, {wireDate(tDatetime, 2024, 1, 5, 0, 0, 0, 0), "2024-01-05 00:00:00"},
			{wireDate(tDatetime, 2024, 1, 5, 10, 0, 0, 0), "2024-01-05 10:00:00"},
			{wireDate(tDate, 2024, 1, 5, 10, 0, 0, 0), "2024-01-05 00:00:00"}, // MariaDB reads only a DATE's date
			{time1001, ""}, {wireInt(tLonglong, 20240105), "2024-01-05 00:00:00"}, {wireText(tVarStr, "2024-01-05"), "2024-01-05 00:00:00"},
			{wireDate(tDate, 2024, 2, 30, 0, 0, 0, 0), ""}, {wireDate(tDate, 0, 0, 0, 0, 0, 0, 0), ""}, {wireDouble(20240105), ""},
		}},
		{"p_datetime", "k DATETIME(6)", []string{"'2024-01-05 00:10:01'", "'2024-01-05 00:10:01.5'", "'2024-01-05 00:00:00'"}, []paramCase{
			{dt0105, "2024-01-05 00:10:01"}, {wireDate(tDatetime, 2024, 1, 5, 0, 10, 1, 500000), "2024-01-05 00:10:01.5"},
			{wireDate(mysql.MYSQL_TYPE_TIMESTAMP, 2024, 1, 5, 0, 10, 1, 0), "2024-01-05 00:10:01"}, {date0105, "2024-01-05 00:00:00"},
			{time1001, ""}, {wireInt(tLonglong, 20240105001001), "2024-01-05 00:10:01"},
			{wireDate(tDatetime, 2024, 1, 5, 24, 0, 0, 0), ""},
		}},
		{"p_time", "k TIME(6)", []string{"'00:10:01'", "'-00:10:01'", "'00:00:00'", "'26:03:04'", "'00:10:01.5'"}, []paramCase{
			{time1001, "00:10:01"}, {wireTime(true, 0, 0, 10, 1, 0), "-00:10:01"}, {wireTime(false, 0, 0, 0, 0, 0), "00:00:00"},
			{wireTime(false, 1, 2, 3, 4, 0), "26:03:04"}, {wireTime(false, 0, 26, 3, 4, 0), "26:03:04"},
			{wireTime(false, 0, 0, 10, 1, 500000), "00:10:01.5"}, {wireInt(tLonglong, 1001), "00:10:01"},
			{wireText(tVarStr, "00:10:01"), "00:10:01"}, {wireText(tVarStr, "10:01"), ""}, {date0105, ""}, {dt0105, ""},
			{wireTime(false, 40, 0, 0, 0, 0), ""},
		}},
	}
}

// TestBinaryParamsAgreeWithMariaDB sends each parameter with its exact
// binary-protocol type to MariaDB in a prepared `SELECT k FROM t WHERE k =
// ?` (by the primary key and by a full scan) and checks that every row
// MariaDB matches has the key lockproxy derives from the same packet, and
// that lockproxy keys or refuses each case as expected.
func TestBinaryParamsAgreeWithMariaDB(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	cols := paramColumns()
	var ruleList strings.Builder
	for _, c := range cols {
		if _, err := db.Exec("CREATE TABLE " + c.table + " (" + c.ddl + " PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.rows {
			if _, err := db.Exec("INSERT INTO " + c.table + " VALUES (" + r + ")"); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
		}
		fmt.Fprintf(&ruleList, "  - {name: %s, table: %s.%s, key: [k]}\n", c.table, dbName, c.table)
	}
	cfg, err := rules.LoadBytes("params.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+ruleList.String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, problems, err := rules.LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	schema = schema.WithTextServer(rules.NewTextServer(db))
	raw := dialRaw(t, bed.PrimaryAddr, bed.User, bed.Password, dbName, false)
	matched := 0
	for _, c := range cols {
		t.Run(c.table, func(t *testing.T) {
			col := schema.Table(dbName, c.table).Column("k")
			rowKeys := paramRowKeys(t, raw, c.table, col)
			byIndex, _ := raw.prepare("SELECT CAST(k AS CHAR) FROM " + c.table + " WHERE k = ?")
			byScan, _ := raw.prepare("SELECT CAST(k AS CHAR) FROM " + c.table + " IGNORE INDEX (PRIMARY) WHERE k = ?")
			for _, pc := range c.cases {
				key, kerr := lockproxyKey(t, col, pc.p)
				selected := map[string]bool{}
				for _, id := range []uint32{byIndex, byScan} {
					_, rows, err := raw.executeTyped(id, pc.p)
					if err != nil {
						t.Logf("%-45s MariaDB: %v", pc.p, err)
					}
					for _, r := range rows {
						selected[r] = true
					}
				}
				switch {
				case pc.key == "" && kerr == nil:
					t.Errorf("%s: keyed %q, want refused (MariaDB selects %v)", pc.p, key, keysOf(selected))
				case pc.key != "" && kerr != nil:
					t.Errorf("%s: refused (%v), want key %q (MariaDB selects %v)", pc.p, kerr, pc.key, keysOf(selected))
				case pc.key != "" && pc.key != "*" && key != pc.key:
					t.Errorf("%s: key %q, want %q", pc.p, key, pc.key)
				}
				if kerr != nil {
					t.Logf("%-45s refused (%v); MariaDB selects %v", pc.p, kerr, keysOf(selected))
					continue
				}
				t.Logf("%-45s key %q; MariaDB selects %v", pc.p, key, keysOf(selected))
				if len(selected) > 0 {
					matched++
				}
				for row := range selected {
					if rowKeys[row] != key {
						t.Errorf("%s: MariaDB selects row %q (key %q) but lockproxy keys the parameter %q", pc.p, row, rowKeys[row], key)
					}
				}
			}
		})
	}
	if matched < 40 {
		t.Errorf("only %d keyed parameters selected a row: the table no longer tests much", matched)
	}
}

// lockproxyKey decodes the parameter from the very execute packet sent to
// MariaDB and keys it as lockproxy does.
func lockproxyKey(t *testing.T, col *rules.Column, p typedParam) (string, error) {
	t.Helper()
	pkt := buildExecute(1, []typedParam{p})
	types, ok := executeParamTypes(pkt, 1)
	if !ok {
		t.Fatalf("%s: no parameter types in % x", p, pkt)
	}
	params, err := executeParams(pkt, 1, types, nil)
	if err != nil {
		t.Fatalf("%s: decode: %v", p, err)
	}
	k, err := rules.NormalizeParam(col, params[0].(rules.Param), rules.Compare)
	return string(k), err
}

// paramRowKeys reads every row back and keys it as a client would spell
// it in a literal.
func paramRowKeys(t *testing.T, raw *rawConn, table string, col *rules.Column) map[string]string {
	t.Helper()
	rows, err := raw.query("SELECT CAST(k AS CHAR) FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		v := parser.Value{Kind: parser.ValueString, Str: r, Text: r}
		switch col.DataType {
		case "int", "bigint", "decimal":
			v.Kind = parser.ValueDecimal
		}
		k, err := rules.Normalize(col, v, rules.Compare)
		if err != nil {
			t.Fatalf("stored row %q: %v", r, err)
		}
		out[r] = string(k)
	}
	return out
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
