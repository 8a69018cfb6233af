package proxy

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// Transparency tests for go-sql-driver/mysql: every workload runs once
// straight against the primary and once through lockproxy, each in a fresh
// database of its own, and the two transcripts must be identical.

// protocolModes are the two ways go-sql-driver sends a statement with
// arguments: server-side prepared (binary protocol) and interpolated text.
var protocolModes = []struct{ name, params string }{
	{"prepared", ""},
	{"text", "interpolateParams=true"},
}

// transcript records what a client saw, in a form that two runs can compare.
type transcript struct{ b strings.Builder }

func (tr *transcript) printf(format string, args ...any) { fmt.Fprintf(&tr.b, format+"\n", args...) }

// errText is an error as the client sees it: code, SQLSTATE and message.
func errText(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("ERROR %d (%s): %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	return "error: " + err.Error()
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// exec runs a statement and records its result or error.
func (tr *transcript) exec(db execer, q string, args ...any) {
	res, err := db.ExecContext(context.Background(), q, args...)
	if err != nil {
		tr.printf("exec %q: %s", q, errText(err))
		return
	}
	n, err1 := res.RowsAffected()
	id, err2 := res.LastInsertId()
	tr.printf("exec %q: affected=%d (%v) insert_id=%d (%v)", q, n, err1, id, err2)
}

// query runs a query and records every result set it returns.
func (tr *transcript) query(db execer, q string, args ...any) {
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		tr.printf("query %q: %s", q, errText(err))
		return
	}
	defer rows.Close()
	tr.printf("query %q:", q)
	for set := 0; ; set++ {
		tr.rowSet(set, rows)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		tr.printf("  rows error: %s", errText(err))
	}
}

// rowSet records the column metadata and rows of the current result set.
func (tr *transcript) rowSet(set int, rows *sql.Rows) {
	types, err := rows.ColumnTypes()
	if err != nil {
		tr.printf("  set %d: columns: %s", set, errText(err))
		return
	}
	for _, ct := range types {
		n, _ := ct.Nullable()
		l, lok := ct.Length()
		p, s, dok := ct.DecimalSize()
		tr.printf("  set %d column %s %s scan=%v null=%v len=%d/%v dec=%d,%d/%v",
			set, ct.Name(), ct.DatabaseTypeName(), ct.ScanType(), n, l, lok, p, s, dok)
	}
	vals := make([]sql.RawBytes, len(types))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			tr.printf("  scan: %s", errText(err))
			return
		}
		var line strings.Builder
		for _, v := range vals {
			if v == nil {
				line.WriteString(" NULL")
			} else {
				fmt.Fprintf(&line, " %q", []byte(v))
			}
		}
		tr.printf("  set %d row:%s", set, line.String())
	}
}

// sideDB makes a fresh database for one side of a comparison and opens it.
func sideDB(t *testing.T, p *testProxy, side, params string) *sql.DB {
	t.Helper()
	name := dbName(t, side)
	testbed.MustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`")
	if side == "direct" {
		return p.direct(t, name, params)
	}
	return p.db(t, name, params)
}

// dbName is a database name for the test and side, at most 64 bytes.
func dbName(t *testing.T, side string) string {
	sum := sha256.Sum256([]byte(t.Name()))
	base := strings.ToLower(strings.NewReplacer("/", "_", " ", "_", "-", "_", "=", "_").Replace(t.Name()))
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("t_%s_%x_%s", base, sum[:3], side)
}

// compareSides runs w directly and through the proxy and fails on any
// difference between the transcripts.
func compareSides(t *testing.T, p *testProxy, params string, w func(t *testing.T, db *sql.DB, tr *transcript)) string {
	t.Helper()
	var got [2]string
	for i, side := range []string{"direct", "proxy"} {
		db := sideDB(t, p, side, params)
		var tr transcript
		w(t, db, &tr)
		// Messages name the database; the two sides use different ones.
		got[i] = strings.ReplaceAll(tr.b.String(), dbName(t, side), "<db>")
	}
	if got[0] != got[1] {
		t.Errorf("proxy differs from direct:\n%s", lineDiff(got[0], got[1]))
	}
	if got[0] == "" {
		t.Error("workload recorded nothing")
	}
	return got[1]
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n direct: %s\n proxy:  %s", i+1, x, y)
		}
	}
	return "(no line differs)"
}

// conn pins one connection of db for a workload that needs session state.
// After a failed test it is discarded, not returned to the pool: it may
// still be in a transaction whose locks would stall the next test.
func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = c.Close()
	})
	return c
}

func TestGoSQLWorkloads(t *testing.T) {
	p := startProxy(t, nil)
	mysql.RegisterReaderHandler("lockproxy_rows", func() io.Reader {
		var b bytes.Buffer
		for i := 1; i <= 50000; i++ {
			fmt.Fprintf(&b, "%d\trow-%d\n", i, i)
		}
		return &b
	})
	mysql.RegisterReaderHandler("lockproxy_empty", func() io.Reader { return strings.NewReader("") })
	workloads := []struct {
		name   string
		params string
		run    func(t *testing.T, db *sql.DB, tr *transcript)
		want   []string // fragments the proxy's transcript must contain
	}{
		{"crud", "", workloadCRUD, []string{`"b" "2"`, "affected=2"}},
		{"transactions", "", workloadTxn, []string{"after commit", `row: "1"`}},
		{"multi_statements", "multiStatements=true", workloadMulti, []string{"set 2 row"}},
		{"procedure", "multiStatements=true", workloadProcedure, []string{"set 1 row"}},
		{"last_insert_id", "", workloadInsertID, []string{"insert_id=2", `row: "2"`, `row: "1100"`}},
		{"rows_affected", "", workloadAffected, []string{"affected=0"}},
		{"found_rows", "clientFoundRows=true", workloadAffected, []string{"affected=1"}},
		{"warnings", "", workloadWarnings, []string{"1265", "1365"}},
		{"errors", "", workloadErrors, []string{"ERROR 1062 (23000)", "ERROR 1064 (42000)", "ERROR 1146 (42S02)",
			"rows error: ERROR 1242 (21000)"}},
		{"load_data_local", "", workloadLoadData, []string{`row: "50000" "1250025000"`}},
		{"fresh_session", "", workloadFreshSession, []string{`row: NULL "1" "SYSTEM" "1" "0" "<db>" "utf8mb4" "utf8mb4_general_ci" "0"`}},
		{"types", "", workloadTypes, []string{`"\x00\x01\x00\xff"`, `"18446744073709551615"`}},
	}
	for _, m := range protocolModes {
		for _, w := range workloads {
			t.Run(m.name+"/"+w.name, func(t *testing.T) {
				params := strings.Trim(m.params+"&"+w.params, "&")
				got := compareSides(t, p, params, w.run)
				for _, f := range w.want {
					if !strings.Contains(got, f) {
						t.Errorf("transcript lacks %q:\n%s", f, got)
					}
				}
			})
		}
	}
}

func workloadCRUD(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE kv (k VARCHAR(10) PRIMARY KEY, v INT NOT NULL, note TEXT)")
	tr.exec(db, "INSERT INTO kv VALUES (?, ?, ?), (?, ?, ?)", "a", 1, nil, "b", 2, "two")
	tr.query(db, "SELECT k, v, note FROM kv ORDER BY k")
	tr.query(db, "SELECT k, v FROM kv WHERE k = ? OR v > ?", "a", 1)
	tr.exec(db, "UPDATE kv SET v = v + ? WHERE k IN (?, ?)", 10, "a", "b")
	tr.query(db, "SELECT SUM(v), COUNT(*), GROUP_CONCAT(k ORDER BY k) FROM kv")
	tr.exec(db, "DELETE FROM kv WHERE k = ?", "a")
	tr.exec(db, "DELETE FROM kv WHERE k = ?", "nope")
	tr.query(db, "SELECT * FROM kv")
	tr.query(db, "SELECT * FROM kv WHERE 1 = 0")
}

func workloadTxn(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE acct (id INT PRIMARY KEY, bal INT) ENGINE=InnoDB")
	for _, end := range []string{"commit", "rollback"} {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		id := map[string]int{"commit": 1, "rollback": 2}[end]
		tr.exec(tx, "INSERT INTO acct VALUES (?, ?)", id, 100)
		tr.query(tx, "SELECT @@in_transaction, COUNT(*) FROM acct")
		tr.query(db, "SELECT COUNT(*) FROM acct WHERE id = ?", id) // another connection
		if end == "commit" {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		tr.printf("%s: %v", end, err)
		tr.printf("after %s:", end)
		tr.query(db, "SELECT COUNT(*) FROM acct WHERE id = ?", id)
	}
	c := conn(t, db)
	tr.exec(c, "SET autocommit = 0")
	tr.exec(c, "UPDATE acct SET bal = bal - 1 WHERE id = 1")
	tr.query(c, "SELECT @@in_transaction, @@autocommit")
	tr.query(db, "SELECT bal FROM acct WHERE id = 1")
	tr.exec(c, "COMMIT")
	tr.query(db, "SELECT bal FROM acct WHERE id = 1")
	tr.exec(c, "SET autocommit = 1")
}

func workloadMulti(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE m (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5)); INSERT INTO m (v) VALUES ('x'), ('y'); INSERT INTO m (v) VALUES ('z')")
	tr.query(db, "SELECT 1 AS one; SELECT v FROM m ORDER BY id; UPDATE m SET v = 'w' WHERE id = 1; SELECT id, v FROM m WHERE id < 3 ORDER BY id")
	tr.query(db, "SELECT 1; SELECT * FROM no_such_table; SELECT 3")
	tr.query(db, "SELECT COUNT(*) FROM m")
}

func workloadProcedure(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, `CREATE PROCEDURE two_sets(IN n INT)
BEGIN
  SELECT n AS n, 'first' AS which;
  SELECT seq, seq * n AS product FROM seq_1_to_3;
  SELECT NULL AS nothing, CAST(n AS DECIMAL(10,2)) AS d;
END`)
	tr.exec(db, "CREATE PROCEDURE no_sets(INOUT x INT) BEGIN SET x = x * 2; END")
	tr.query(db, "CALL two_sets(7)")
	tr.query(db, "CALL two_sets(?)", 5)
	tr.exec(db, "CALL two_sets(1)")
	c := conn(t, db)
	tr.exec(c, "SET @x = 21")
	tr.exec(c, "CALL no_sets(@x)")
	tr.query(c, "SELECT @x")
	tr.query(db, "CALL no_such_proc()")
}

func workloadInsertID(t *testing.T, db *sql.DB, tr *transcript) {
	c := conn(t, db)
	tr.exec(c, "CREATE TABLE ai (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
	tr.exec(c, "INSERT INTO ai (v) VALUES (?)", 1)
	tr.exec(c, "INSERT INTO ai (v) VALUES (?), (?), (?)", 2, 3, 4)
	tr.query(c, "SELECT LAST_INSERT_ID()")
	tr.exec(c, "INSERT INTO ai (id, v) VALUES (?, ?)", 100, 5)
	tr.query(c, "SELECT LAST_INSERT_ID()")
	tr.exec(c, "UPDATE ai SET id = LAST_INSERT_ID(id + 1000) WHERE v = ?", 5)
	tr.query(c, "SELECT LAST_INSERT_ID()")
	tr.exec(c, "INSERT INTO ai (v) VALUES (6) ON DUPLICATE KEY UPDATE v = 7")
}

func workloadAffected(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE ra (id INT PRIMARY KEY, v INT)")
	tr.exec(db, "INSERT INTO ra VALUES (1, 1), (2, 2), (3, 3)")
	tr.exec(db, "UPDATE ra SET v = 1 WHERE id = 1")
	tr.exec(db, "UPDATE ra SET v = ? WHERE id <= ?", 2, 3)
	tr.exec(db, "INSERT INTO ra VALUES (1, 9) ON DUPLICATE KEY UPDATE v = 9")
	tr.exec(db, "INSERT INTO ra VALUES (1, 9) ON DUPLICATE KEY UPDATE v = 9")
	tr.exec(db, "REPLACE INTO ra VALUES (2, 20)")
	tr.exec(db, "DELETE FROM ra WHERE v > ?", 100)
}

func workloadWarnings(t *testing.T, db *sql.DB, tr *transcript) {
	c := conn(t, db)
	tr.exec(c, "SET SESSION sql_mode = ''")
	tr.exec(c, "CREATE TABLE w (s VARCHAR(3), n TINYINT)")
	tr.exec(c, "INSERT INTO w VALUES ('abcdef', 1000)")
	tr.query(c, "SHOW WARNINGS")
	tr.query(c, "SHOW COUNT(*) WARNINGS")
	tr.exec(c, "INSERT INTO w VALUES (?, ?)", "xyzzy", -1000)
	tr.query(c, "SHOW WARNINGS")
	tr.exec(c, "SET SESSION sql_mode = DEFAULT")
	tr.query(c, "SELECT 1/0")
	tr.query(c, "SHOW WARNINGS")
	tr.query(c, "SELECT @@warning_count, @@error_count")
	tr.query(c, "SELECT * FROM w")
}

func workloadErrors(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20) UNIQUE)")
	tr.exec(db, "INSERT INTO u VALUES (?, ?)", 1, "a@x")
	tr.exec(db, "INSERT INTO u VALUES (?, ?)", 2, "a@x")
	tr.exec(db, "INSERT INTO u VALUES (1, 'b@x')")
	tr.query(db, "SELEKT 1")
	tr.query(db, "SELECT * FROM missing_table")
	tr.query(db, "SELECT missing_column FROM u")
	tr.exec(db, "INSERT INTO u VALUES (?, ?)", nil, "c@x")
	// An error after the first row: the result set ends in ERR.
	tr.query(db, "SELECT seq, (SELECT 1 UNION SELECT seq) FROM seq_1_to_3")
	tr.query(db, "SELECT seq, (SELECT 1 UNION SELECT seq) FROM seq_1_to_3 WHERE seq > ?", 0)
	tr.query(db, "SELECT COUNT(*) FROM u")
}

// workloadLoadData streams LOAD DATA LOCAL INFILE content through.
func workloadLoadData(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, "CREATE TABLE ld (id INT PRIMARY KEY, s VARCHAR(20))")
	tr.exec(db, "LOAD DATA LOCAL INFILE 'Reader::lockproxy_rows' INTO TABLE ld")
	tr.query(db, "SELECT COUNT(*), SUM(id), SUM(CRC32(s)) FROM ld")
	tr.exec(db, "LOAD DATA LOCAL INFILE 'Reader::lockproxy_empty' INTO TABLE ld")
	tr.exec(db, "LOAD DATA LOCAL INFILE 'Reader::lockproxy_unregistered' INTO TABLE ld")
	tr.query(db, "SELECT COUNT(*) FROM ld")
}

// workloadFreshSession dirties a session and closes it, five times; each
// new connection must start as clean as a new direct one, also when
// lockproxy gives it a pooled backend connection that the last one used.
func workloadFreshSession(t *testing.T, db *sql.DB, tr *transcript) {
	db.SetMaxIdleConns(0) // a closed sql.Conn ends its session
	tr.exec(db, "CREATE TABLE fs (id INT PRIMARY KEY)")
	for i := range 5 {
		c := conn(t, db)
		tr.query(c, "SELECT @leak, @@sql_mode = @@global.sql_mode, @@time_zone, @@autocommit, @@in_transaction, "+
			"DATABASE(), @@character_set_client, @@collation_connection, (SELECT COUNT(*) FROM fs)")
		tr.query(c, "SELECT * FROM tmpx")
		for _, q := range []string{"SET @leak = 1", "SET SESSION sql_mode = 'ANSI_QUOTES'", "SET time_zone = '+05:00'",
			"SET NAMES latin1", "SET autocommit = 0", fmt.Sprintf("INSERT INTO fs VALUES (%d)", i),
			"CREATE TEMPORARY TABLE tmpx (a INT)", "USE mysql"} {
			tr.exec(c, q)
		}
		_ = c.Close()
	}
}

// typesTable has a column of every common type.
const typesTable = `CREATE TABLE ty (
  id INT PRIMARY KEY, d DECIMAL(30,10), dt DATETIME(6), b BLOB, j JSON, bi BIT(12),
  ub BIGINT UNSIGNED, sb BIGINT, f FLOAT, fd DOUBLE, da DATE, tm TIME(3), vc VARCHAR(50),
  en ENUM('a','b'), st SET('x','y','z'), yr YEAR, ti TINYINT, ch CHAR(5), tx TEXT,
  vb VARBINARY(20), mi MEDIUMINT UNSIGNED, ts TIMESTAMP(3) NULL
) DEFAULT CHARSET=utf8mb4`

var typesRow = []any{
	1, "12345678901234567890.0123456789", "2024-02-29 23:59:59.123456", []byte{0, 1, 0, 255},
	`{"a": [1, 2, {"b": null}], "c": "é"}`, []byte{0x0a, 0xbc}, uint64(math.MaxUint64),
	int64(math.MinInt64), float32(1.5), math.Pi, "2000-01-01", "-838:59:59.000", "héllo 😀 wörld",
	"b", "x,z", 2155, -128, "ab", "line1\nline2\x00end", []byte{0, 0, 0}, 16777215, "2030-01-02 03:04:05.678",
}

func workloadTypes(t *testing.T, db *sql.DB, tr *transcript) {
	tr.exec(db, typesTable)
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(typesRow)), ", ")
	tr.exec(db, "INSERT INTO ty VALUES ("+marks+")", typesRow...)
	tr.exec(db, "INSERT INTO ty (id) VALUES (2)")
	tr.query(db, "SELECT * FROM ty ORDER BY id")                  // text protocol
	tr.query(db, "SELECT * FROM ty WHERE id >= ? ORDER BY id", 0) // binary protocol when prepared
	var ub uint64
	var b, bi []byte
	var j string
	err := db.QueryRow("SELECT ub, b, bi, j FROM ty WHERE id = ?", 1).Scan(&ub, &b, &bi, &j)
	switch {
	case err != nil:
		t.Errorf("scan: %v", err)
	case ub != math.MaxUint64 || !bytes.Equal(b, typesRow[3].([]byte)) || !bytes.Equal(bi, typesRow[5].([]byte)) || j != typesRow[4]:
		t.Errorf("round trip: ub=%d b=%x bi=%x j=%s", ub, b, bi, j)
	}
}

func TestGoSQLErrorsPassThrough(t *testing.T) {
	p := startProxy(t, nil)
	cases := []struct {
		name   string
		number uint16
		state  string
		run    func(t *testing.T, db *sql.DB) error
	}{
		{"duplicate_key", 1062, "23000", func(t *testing.T, db *sql.DB) error {
			testbed.MustExec(t, db, "CREATE TABLE d (id INT PRIMARY KEY)", "INSERT INTO d VALUES (1)")
			_, err := db.Exec("INSERT INTO d VALUES (?)", 1)
			return err
		}},
		{"syntax", 1064, "42000", func(t *testing.T, db *sql.DB) error {
			_, err := db.Exec("CREATE TABLE (")
			return err
		}},
		{"prepare_unknown_table", 1146, "42S02", func(t *testing.T, db *sql.DB) error {
			_, err := db.Prepare("SELECT * FROM nowhere WHERE id = ?")
			return err
		}},
	}
	for _, m := range protocolModes {
		for _, c := range cases {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				var got [2]*mysql.MySQLError
				for i, side := range []string{"direct", "proxy"} {
					err := c.run(t, sideDB(t, p, side, m.params))
					if !errors.As(err, &got[i]) {
						t.Fatalf("%s: want *mysql.MySQLError, got %T %v", side, err, err)
					}
					got[i].Message = strings.ReplaceAll(got[i].Message, dbName(t, side), "<db>")
				}
				assertSameError(t, got[0], got[1], c.number, c.state)
			})
		}
	}
	t.Run("unknown_database_in_dsn", func(t *testing.T) {
		var got [2]*mysql.MySQLError
		for i, addr := range []string{p.bed.PrimaryAddr, p.addr} {
			db, err := sql.Open("mysql", p.bed.DSN(addr, "no_such_db_lockproxy", ""))
			if err != nil {
				t.Fatal(err)
			}
			err = db.Ping()
			_ = db.Close()
			if !errors.As(err, &got[i]) {
				t.Fatalf("%s: want *mysql.MySQLError, got %T %v", addr, err, err)
			}
		}
		assertSameError(t, got[0], got[1], 1049, "42000")
	})
}

func assertSameError(t *testing.T, direct, proxied *mysql.MySQLError, number uint16, state string) {
	t.Helper()
	if direct.Number != number || string(direct.SQLState[:]) != state {
		t.Errorf("direct error is %d (%s), the test expects %d (%s)", direct.Number, direct.SQLState, number, state)
	}
	if proxied.Number != direct.Number || proxied.SQLState != direct.SQLState || proxied.Message != direct.Message {
		t.Errorf("proxy error %d (%s) %q, direct %d (%s) %q", proxied.Number, proxied.SQLState, proxied.Message,
			direct.Number, direct.SQLState, direct.Message)
	}
}

func TestGoSQLAuthPlugins(t *testing.T) {
	for _, plugin := range []string{"", "mysql_native_password", "caching_sha2_password"} {
		t.Run("plugin="+plugin, func(t *testing.T) {
			p := startProxyOpts(t, Options{AuthPlugin: plugin})
			db := p.db(t, "", "")
			var user, one string
			if err := db.QueryRow("SELECT CURRENT_USER(), 1").Scan(&user, &one); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(user, p.bed.User+"@") || one != "1" {
				t.Errorf("got %q %q", user, one)
			}
			dsn := strings.Replace(p.bed.DSN(p.addr, "", ""), ":"+p.bed.Password+"@", ":wrong-password@", 1)
			bad, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			var me *mysql.MySQLError
			if err := bad.Ping(); !errors.As(err, &me) || me.Number != 1045 || string(me.SQLState[:]) != "28000" ||
				!strings.HasPrefix(me.Message, "lockproxy: ") {
				t.Errorf("wrong password: got %v, want 1045 (28000) from lockproxy", err)
			}
		})
	}
}

func TestGoSQLLargeValues(t *testing.T) {
	p := startProxy(t, nil)
	// Raise the server's limit first; only connections opened afterwards
	// see it, and this proxy's pool has none open yet.
	testbed.MustExec(t, p.direct(t, "", ""), "SET GLOBAL max_allowed_packet = 64*1024*1024")
	type size struct {
		name string
		n    int
	}
	modes := []struct {
		name, params string
		sizes        []size
	}{
		{"prepared", "", []size{{"execute_packet_exactly_16MB", maxPayload - 18},
			{"binary_row_exactly_16MB", maxPayload - 6}, {"17MB", 17 << 20}}},
		// A value over maxAllowedPacket/2 goes by COM_STMT_SEND_LONG_DATA.
		{"prepared_long_data", "maxAllowedPacket=4194304", []size{{"5MB", 5 << 20}}},
		// The interpolated INSERT is itself a COM_QUERY of over 16 MB.
		{"text", "interpolateParams=true", []size{{"text_row_exactly_16MB", maxPayload - 4}}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			name := dbName(t, "big")
			testbed.MustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`",
				"CREATE TABLE `"+name+"`.big (id INT PRIMARY KEY, b LONGBLOB)")
			direct, proxied := p.direct(t, name, ""), p.db(t, name, m.params)
			for i, sz := range m.sizes {
				t.Run(sz.name, func(t *testing.T) {
					val := make([]byte, sz.n)
					for j := range val {
						val[j] = byte(j*7 + j>>16)
					}
					if _, err := proxied.Exec("INSERT INTO big VALUES (?, ?)", i, val); err != nil {
						t.Fatalf("insert through the proxy: %v", err)
					}
					sum := md5.Sum(val)
					var n int
					var dsum string
					if err := direct.QueryRow("SELECT LENGTH(b), MD5(b) FROM big WHERE id = ?", i).Scan(&n, &dsum); err != nil {
						t.Fatal(err)
					}
					if n != sz.n || dsum != hex.EncodeToString(sum[:]) {
						t.Errorf("stored %d bytes md5 %s, sent %d md5 %x", n, dsum, sz.n, sum)
					}
					// Text protocol, and binary when the handle prepares.
					for _, args := range [][]any{nil, {i}} {
						q := fmt.Sprintf("SELECT b FROM big WHERE id = %d", i)
						if args != nil {
							q = "SELECT b FROM big WHERE id = ?"
						}
						var got []byte
						if err := proxied.QueryRow(q, args...).Scan(&got); err != nil {
							t.Fatalf("%s: %v", q, err)
						}
						if !bytes.Equal(got, val) {
							t.Errorf("%s: read %d bytes through the proxy, not the %d written", q, len(got), len(val))
						}
					}
				})
			}
		})
	}
}

// bigResultQuery returns 200,000 rows whose values are known in advance.
const bigResultQuery = "SELECT seq, CONCAT('row-', seq), seq * 1.25, IF(seq % 7 = 0, NULL, REPEAT('x', seq % 50)) FROM seq_1_to_200000"

func TestGoSQLLargeResult(t *testing.T) {
	p := startProxy(t, nil)
	const n = 200000
	want := newRowHash()
	for seq := uint64(1); seq <= n; seq++ {
		var last []byte
		if seq%7 != 0 {
			last = bytes.Repeat([]byte("x"), int(seq%50))
		}
		want.add(fmt.Appendf(nil, "%d", seq), fmt.Appendf(nil, "row-%d", seq),
			fmt.Appendf(nil, "%d.%02d", seq*125/100, seq*125%100), last)
	}
	db := sideDB(t, p, "proxy", "")
	for _, m := range []struct {
		name string
		q    string
		args []any
	}{
		{"text", bigResultQuery, nil},
		{"binary", bigResultQuery + " WHERE seq > ?", []any{0}},
	} {
		t.Run(m.name, func(t *testing.T) {
			got := newRowHash()
			rows, err := db.Query(m.q, m.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			vals := make([]sql.RawBytes, 4)
			for rows.Next() {
				if err := rows.Scan(&vals[0], &vals[1], &vals[2], &vals[3]); err != nil {
					t.Fatal(err)
				}
				got.add(vals...)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if got.rows != n || got.sum() != want.sum() {
				t.Errorf("got %d rows with checksum %s, want %d rows with checksum %s", got.rows, got.sum(), n, want.sum())
			}
		})
	}
}

// rowHash counts rows and hashes their values, NULL distinct from empty.
type rowHash struct {
	rows int
	h    hash.Hash
}

func newRowHash() *rowHash { return &rowHash{h: sha256.New()} }

func (r *rowHash) add(vals ...sql.RawBytes) {
	for _, v := range vals {
		if v == nil {
			r.h.Write([]byte("N;"))
			continue
		}
		fmt.Fprintf(r.h, "%d:%s;", len(v), v)
	}
	r.rows++
}

func (r *rowHash) sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

// startProxyOpts is startProxy with Options of the test's choosing (the
// auth plugin announced to clients).
func startProxyOpts(t testing.TB, opts Options) *testProxy {
	t.Helper()
	bed := testbed.Get(t)
	yaml := fmt.Sprintf("proxy: {handshake_timeout: 5s}\nusers: [{user: %s, password: %q}]\n"+
		"backends: {primary: '%s'}\nlocks: {backend: memory}\n", bed.User, bed.Password, bed.PrimaryAddr)
	cfg, err := rules.LoadBytes("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	reg := prometheus.NewRegistry()
	opts.Logger, opts.Registry = zaptest.NewLogger(t), reg
	return serveProxy(t, bed, cfg, opts, reg)
}
