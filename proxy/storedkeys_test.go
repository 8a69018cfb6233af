package proxy

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// Lost-update tests for keys MariaDB converts before it compares or
// stores them: dates and datetimes, values clipped, cut or rounded on
// the way into the row, and keys a BEFORE INSERT trigger changes. Where
// lockproxy keys a statement, one session holds the row through one
// spelling and another writes it through another and must wait (see
// heldThenWritten); where it cannot know the row, the statement is
// refused and writes nothing.

// storedKeyTables are the tables of these tests and their rows.
var storedKeyTables = []string{
	"CREATE TABLE ev (k DATETIME PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE day (k DATE PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE evf (k DATETIME(2) PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE ikey (k INT PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE ukey (k BIGINT UNSIGNED PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE skey (k VARCHAR(32) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE trg (k INT PRIMARY KEY, v INT NOT NULL)",
	"CREATE TABLE dec12 (k DECIMAL(12,3) PRIMARY KEY, v INT NOT NULL)",
	"INSERT INTO dec12 VALUES (1001.5, 0), (1001.501, 0), (999999999.999, 0)",
	"INSERT INTO ev VALUES ('2000-10-01 12:00:00', 0), ('2000-10-01 12:00:01', 0)",
	"INSERT INTO day VALUES ('2000-10-01', 0)",
	"INSERT INTO evf VALUES ('2000-10-01 12:00:00.5', 0), ('2000-10-01 12:00:00.51', 0)",
	"INSERT INTO ikey VALUES (2147483647, 0), (-2147483648, 0), (1001, 0)",
	"INSERT INTO ukey VALUES (18446744073709551615, 0), (0, 0)",
	"INSERT INTO skey VALUES ('" + strings.Repeat("x", 32) + "', 0), ('abc', 0)",
	"INSERT INTO trg VALUES (1001, 0)",
	"CREATE TRIGGER trg_set BEFORE INSERT ON trg FOR EACH ROW SET NEW.k = NEW.k + 1",
}

// storedKeyValue reads column v of the row of table whose key is lit (a
// literal) straight from the primary.
func storedKeyValue(t *testing.T, direct *sql.DB, table, lit string) func() int {
	return func() int {
		t.Helper()
		var v int
		if err := direct.QueryRow("SELECT v FROM " + table + " WHERE k = " + lit).Scan(&v); err != nil {
			t.Fatalf("%s row %s: %v", table, lit, err)
		}
		return v
	}
}

// tableText is every row of table, to show a refused statement wrote
// nothing.
func tableText(t *testing.T, direct *sql.DB, table string) string {
	t.Helper()
	var s sql.NullString
	if err := direct.QueryRow("SELECT GROUP_CONCAT(k, ':', v ORDER BY k SEPARATOR ',') FROM " + table).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s.String
}

// refusedUnwritten sends q on r and wants lockproxy's 1105 naming the
// rule, with table unchanged.
func refusedUnwritten(t *testing.T, r *rawConn, direct *sql.DB, table, q string) {
	t.Helper()
	before := tableText(t, direct, table)
	_, err := r.query(q)
	if me := myErr(t, err); me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "sku-stock") {
		t.Fatalf("%s: want lockproxy's 1105 naming the rule, got %v", q, me)
	}
	if after := tableText(t, direct, table); after != before {
		t.Fatalf("%s was refused, yet table %s changed: %s → %s", q, table, before, after)
	}
}

// TestTemporalKeyLostUpdates holds a DATE, DATETIME and DATETIME(2) row
// through one spelling and writes it through others MariaDB reads or
// stores as the same value, by UPDATE and by an upsert; a fraction MariaDB
// would round or cut on the way into the row (which one depends on
// TIME_ROUND_FRACTIONAL), and a date the month lacks, are refused.
func TestTemporalKeyLostUpdates(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, storedKeyTables...)
	cases := []struct {
		table, held string
		writes      []string // values spelling the held row
	}{
		{"ev", "'2000-10-01 12:00:00'", []string{"'20001001120000'", "20001001120000", "'2000/10/01 12:00:00'", "'2000-10-01T12:00:00'",
			"'2000-10-01 12:00:00.000000'", "' 2000-10-01 12:00:00'", "'2000-10-1 12:00:00'"}},
		{"day", "'2000-10-01'", []string{"'20001001'", "20001001", "'2000/10/01'", "'2000-10-01 00:00:00'"}},
		{"evf", "'2000-10-01 12:00:00.5'", []string{"'2000-10-01 12:00:00.50'", "'20001001120000.5'", "'2000-10-01 12:00:00.500000'"}},
	}
	for _, c := range cases {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+"."+c.table, []string{"k"} })
		for i, w := range c.writes {
			write := "UPDATE " + c.table + " SET v = v + 1 WHERE k = " + w
			if i%2 == 1 {
				write = "INSERT INTO " + c.table + " (k, v) VALUES (" + w + ", 0) ON DUPLICATE KEY UPDATE v = v + 1"
			}
			t.Run(c.table+" "+w, func(t *testing.T) {
				r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
				heldThenWritten(t, p, db, r, write, storedKeyValue(t, direct, c.table, c.held), "UPDATE "+c.table+" SET v = v WHERE k = "+c.held)
			})
		}
	}
	// Stored into a DATE, a datetime keeps its date: the row is 2000-10-01.
	t.Run("time into a DATE", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+".day", []string{"k"} })
		for _, w := range []string{"'2000-10-01 12:00:00'", "20001001235959", "'2000-10-01 23:59:59.999999'"} {
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			heldThenWritten(t, p, db, r, "INSERT INTO day (k, v) VALUES ("+w+", 0) ON DUPLICATE KEY UPDATE v = v + 1",
				storedKeyValue(t, direct, "day", "'2000-10-01'"), "UPDATE day SET v = v WHERE k = '2000-10-01'")
		}
	})
	t.Run("rounded or cut on the way in", func(t *testing.T) {
		for _, c := range []struct{ table, q string }{
			{"ev", "INSERT INTO ev (k, v) VALUES ('2000-10-01 12:00:00.5', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
			{"ev", "REPLACE INTO ev (k, v) VALUES ('2000-10-01 12:00:00.4', 9)"},
			{"evf", "INSERT INTO evf (k, v) VALUES ('2000-10-01 12:00:00.505', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
			{"ev", "INSERT IGNORE INTO ev (k, v) VALUES ('2000-02-30 12:00:00', 0)"},
		} {
			p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+"."+c.table, []string{"k"} })
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			for _, mode := range []string{"DEFAULT", "''"} {
				if _, err := r.query("SET sql_mode = " + mode); err != nil {
					t.Fatal(err)
				}
				refusedUnwritten(t, r, direct, c.table, c.q)
			}
		}
	})
}

// TestClippedKeyLostUpdates: under an empty sql_mode (and INSERT IGNORE)
// MariaDB stores an out-of-range integer or decimal as the nearest end of
// the range, -1 in an UNSIGNED column as 0, and the first 32 characters of
// a longer VARCHAR(32) value, so that is the row's key: the writer waits
// for the holder of the row it clips or cuts to. (Strict, MariaDB
// refuses such a statement and writes nothing.)
func TestClippedKeyLostUpdates(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, storedKeyTables...)
	long := strings.Repeat("x", 40)
	// Each write adds 1 to v of the held row (v starts at 0; the REPLACE
	// comes first on its row and sets 1).
	keyed := []struct{ table, held, write string }{
		{"ikey", "2147483647", "INSERT IGNORE INTO ikey (k, v) VALUES (99999999999, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ikey", "2147483647", "INSERT INTO ikey (k, v) VALUES (1e10, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ikey", "2147483647", "INSERT IGNORE INTO ikey (k, v) VALUES ('2147483647.0', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ikey", "-2147483648", "REPLACE INTO ikey (k, v) VALUES ('-99999999999', 1)"},
		{"ikey", "-2147483648", "INSERT INTO ikey (k, v) VALUES (-2147483649, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ikey", "-2147483648", "INSERT INTO ikey (k, v) VALUES (-2147483648e0, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ukey", "0", "INSERT IGNORE INTO ukey (k, v) VALUES (-1, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ukey", "0", "INSERT IGNORE INTO ukey (k, v) VALUES ('-0', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ukey", "18446744073709551615", "INSERT IGNORE INTO ukey (k, v) VALUES (18446744073709551616, 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"ukey", "18446744073709551615", "INSERT IGNORE INTO ukey (k, v) VALUES ('18446744073709551615', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"dec12", "999999999.999", "INSERT INTO dec12 (k, v) VALUES ('1e10', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		// Rounded to the column's scale from the text, as the primary's
		// CAST to DECIMAL(65,3) says: row 1001.500.
		{"dec12", "1001.5", "INSERT INTO dec12 (k, v) VALUES ('1001.50049999999999999999999999999999999999999', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"dec12", "1001.501", "REPLACE INTO dec12 (k, v) VALUES ('1001.5005000000000000000000000000000000000001', 1)"},
		// Cut to its first 32 characters: the row is the 32 x's.
		{"skey", "'" + strings.Repeat("x", 32) + "'", "INSERT IGNORE INTO skey (k, v) VALUES ('" + long + "', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		{"skey", "'" + strings.Repeat("x", 32) + "'", "INSERT INTO skey (k, v) VALUES ('" + strings.ToUpper(long) + "yy', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
		// Trailing spaces past the length are dropped silently, and do not
		// count under PAD SPACE: the row is the 32 x's.
		{"skey", "'" + strings.Repeat("x", 32) + "'", "INSERT INTO skey (k, v) VALUES ('" + strings.Repeat("X", 32) + "     ', 0) ON DUPLICATE KEY UPDATE v = v + 1"},
	}
	for _, c := range keyed {
		t.Run(c.write, func(t *testing.T) {
			p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+"."+c.table, []string{"k"} })
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
			if _, err := r.query("SET sql_mode = ''"); err != nil {
				t.Fatal(err)
			}
			heldThenWritten(t, p, db, r, c.write, storedKeyValue(t, direct, c.table, c.held), "UPDATE "+c.table+" SET v = v WHERE k = "+c.held)
		})
	}
}

// TestTriggerKeyLostUpdates: a BEFORE INSERT trigger sets NEW.k = NEW.k
// + 1, so an insert of 1000 writes row 1001. Unlisted, lockproxy refuses
// the table's inserts, replaces and upserts and nothing is written;
// listed in allow_triggers, they are locked by the key the statement
// gives, as documented: the upsert of 1000 waits for the holder of 1000
// and then changes row 1001.
func TestTriggerKeyLostUpdates(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, storedKeyTables...)
	upsert := "INSERT INTO trg (k, v) VALUES (1000, 0) ON DUPLICATE KEY UPDATE v = v + 1"
	t.Run("unlisted", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) { r.Table, r.Key = db+".trg", []string{"k"} })
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		for _, q := range []string{upsert, "REPLACE INTO trg (k, v) VALUES (1000, 5)", "INSERT INTO trg (k, v) VALUES (2000, 0)"} {
			refusedUnwritten(t, r, direct, "trg", q)
		}
	})
	t.Run("listed", func(t *testing.T) {
		p := guardedProxy(t, db, func(r *rules.Rule) {
			r.Table, r.Key, r.AllowTriggers = db+".trg", []string{"k"}, []string{db + ".trg_set"}
		})
		r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
		heldThenWritten(t, p, db, r, upsert, storedKeyValue(t, direct, "trg", "1001"), "UPDATE trg SET v = v WHERE k = 1000")
	})
}
