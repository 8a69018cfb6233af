package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// The plan oracle lets MariaDB say which rows a statement changed: every
// table of the oracle database has AFTER INSERT/UPDATE/DELETE triggers
// that write the old and new key values of each changed row into
// oracle_changes, inside the statement's own transaction. A statement run
// through lockproxy must either be refused by lockproxy (and change
// nothing) or hold the lock of every guarded row MariaDB changed.

// oracleTables are the tables of the oracle database: the guarded ones
// (with the key columns of their rule) and one no rule guards.
var oracleTables = withTypedTables([]oracleTable{
	{"sku", "sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, note VARCHAR(32)", []string{"sku_id"}, true,
		"(7, 7, 'seven'), (100, 1, 'a'), (200, 2, 'b'), (1001, 1, 'x'), (1002, 10, 'y'), (1003, 100, 'z'), " +
			"(1004, 1000, 'w'), (1005, 0, 'v'), (2001, 5, 'year'), (30000, 3, 'short'), (70000, 4, 'int24'), " +
			"(20001001, 6, 'date'), (20001001000000, 8, 'datetime')"},
	{"acct", "name VARCHAR(32) COLLATE utf8mb4_general_ci PRIMARY KEY, bal INT NOT NULL", []string{"name"}, true,
		"('alice', 10), ('bob', 20), ('Carol', 30), ('dave', 40), ('1001', 50), ('jose', 60), ('ı', 70)"},
	{"bin", "shop_id INT NOT NULL, code VARCHAR(16) COLLATE utf8mb4_general_ci NOT NULL, qty INT NOT NULL, " +
		"PRIMARY KEY (shop_id, code)", []string{"shop_id", "code"}, true,
		"(1, 'a', 1), (1, 'b', 2), (2, 'a', 3), (2, 'B2', 4)"},
	{"sku_stock", "sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0", []string{"sku_id"}, true,
		"(1001, 1, 0), (1002, 10, 0), (1003, 100, 0), (1004, 1000, 0), (1005, 0, 0)"},
	{"free", "id INT PRIMARY KEY, v INT NOT NULL", []string{"id"}, false,
		"(1, 1), (2, 2), (3, 3), (4, 4)"},
})

// oracleTable is one table of the oracle database.
type oracleTable struct {
	name    string
	ddl     string
	keys    []string // key columns, in rule order
	guarded bool
	seed    string // VALUES of the seed rows
}

// withTypedTables adds the guarded tables of the typed keys (see
// oracle_types_test.go) to tables.
func withTypedTables(tables []oracleTable) []oracleTable {
	keys := map[string][]string{}
	for _, k := range typedKeys() {
		keys[k.table] = k.cols
	}
	for _, tt := range typedTableDDL() {
		tables = append(tables, oracleTable{tt.name, tt.ddl, keys[tt.name], true, tt.seed})
	}
	return tables
}

// oracleBed is the oracle database, its rules and the proxy guarding it.
type oracleBed struct {
	p      *testProxy
	db     string
	direct *sql.DB // the primary; READ UNCOMMITTED, so it sees the side table of an open transaction
	schema rules.Schema
	// stored are the key column values of the rows lockName keyed, by
	// key: a key made of weights does not spell its row.
	stored map[string][][]byte
}

// oracleRules are the rules of the guarded oracle tables.
func oracleRules(db string, wait time.Duration) []rules.Rule {
	var out []rules.Rule
	for _, tb := range oracleTables {
		if !tb.guarded {
			continue
		}
		out = append(out, rules.Rule{Name: "oracle-" + tb.name, Table: db + "." + tb.name, Key: tb.keys,
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(wait)})
	}
	return out
}

// oracleOptions say how the oracle's proxy runs.
type oracleOptions struct {
	replica bool // route plain reads to the bed's replica
	// multiplex: sessions borrow primary connections from a pool of three
	// (backends.pool.multiplex).
	multiplex bool
	// quiet drops the proxy's log: thousands of statements would bury a
	// failure, and fuzz workers run inputs after the target's logger is
	// done with.
	quiet bool
}

// startOracle creates the oracle database db (dropping an old one) on bed
// and a proxy with memory locks guarding it. db is fixed per caller so a
// fuzz target reuses one database across inputs.
func startOracle(t testing.TB, bed *testbed.Bed, db string, opt oracleOptions) *oracleBed {
	t.Helper()
	direct := openDB(t, bed.DSN(bed.PrimaryAddr, "", "tx_isolation=%27READ-UNCOMMITTED%27&multiStatements=true"))
	direct.SetMaxOpenConns(1)
	stmts := []string{"DROP DATABASE IF EXISTS `" + db + "`", "CREATE DATABASE `" + db + "` COLLATE utf8mb4_general_ci", "USE `" + db + "`",
		"CREATE TABLE oracle_changes (seq INT AUTO_INCREMENT PRIMARY KEY, tbl VARCHAR(16) NOT NULL, op CHAR(1) NOT NULL, " +
			"old1 VARBINARY(255), old2 VARBINARY(255), new1 VARBINARY(255), new2 VARBINARY(255))"}
	for _, tb := range oracleTables {
		stmts = append(stmts, "CREATE TABLE "+tb.name+" ("+tb.ddl+")")
		stmts = append(stmts, changeTriggers(tb.name, tb.keys)...)
	}
	stmts = append(stmts,
		"CREATE VIEW v_sku AS SELECT sku_id, stock FROM sku_stock",
		"CREATE VIEW v_sku_low AS SELECT sku_id AS k, stock AS s FROM sku WHERE stock < 1000",
		"CREATE PROCEDURE oracle_bump(k BIGINT) UPDATE sku SET stock = stock + 1 WHERE sku_id = k",
		"CREATE PROCEDURE oracle_zero() UPDATE sku SET stock = 0",
		"CREATE PROCEDURE p() UPDATE sku_stock SET stock = 0",
		"CREATE PROCEDURE oracle_name(n VARCHAR(32)) UPDATE acct SET bal = bal + 1 WHERE name = n")
	for _, s := range stmts {
		if _, err := direct.Exec(s); err != nil {
			t.Fatalf("oracle schema: %s: %v", s, err)
		}
	}
	o := &oracleBed{db: db, direct: direct}
	o.reseed(t)
	cfgRules := oracleRules(db, 300*time.Millisecond)
	edit := func(c *rules.Config) {
		c.Rules = cfgRules
		if opt.replica {
			c.Backends.Replicas = []string{bed.ReplicaAddr}
			c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
		}
		if opt.multiplex {
			multiplexed(3)(c)
		}
	}
	if opt.quiet {
		o.p = startQuietProxy(t, bed, edit)
	} else {
		o.p = startProxyOn(t, bed, edit, memlock.New(nil, nil))
	}
	sdb := o.p.direct(t, db, "")
	schema, problems, err := rules.LoadSchema(context.Background(), sdb, &rules.Config{Rules: cfgRules})
	if err != nil || len(problems) > 0 {
		t.Fatalf("oracle schema for the rules: %v %v", err, problems)
	}
	o.schema = schema.WithTextServer(rules.NewTextServer(sdb))
	return o
}

// startQuietProxy is startProxyOn with memory locks and a logger that
// drops everything.
func startQuietProxy(t testing.TB, bed *testbed.Bed, edit func(*rules.Config)) *testProxy {
	t.Helper()
	cfg, err := rules.LoadBytes("oracle.yaml", []byte(fmt.Sprintf("users:\n  - user: %s\n    password: %q\nbackends:\n  primary: %s\nlocks:\n  backend: memory\n",
		bed.User, bed.Password, bed.PrimaryAddr)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	edit(cfg)
	reg := prometheus.NewRegistry()
	return serveProxy(t, bed, cfg, Options{Logger: zap.NewNop(), Registry: reg, Locker: memlock.New(nil, nil)}, reg)
}

// changeTriggers records the key columns' old and new values of every row
// the statement changes.
func changeTriggers(table string, keys []string) []string {
	// Key values as utf8mb4 text, whatever the column's character set, as
	// lockName reads them.
	vals := func(prefix string) string {
		a, b := "CONVERT("+prefix+"."+keys[0]+" USING utf8mb4)", "NULL"
		if len(keys) > 1 {
			b = "CONVERT(" + prefix + "." + keys[1] + " USING utf8mb4)"
		}
		return a + ", " + b
	}
	ins := "INSERT INTO oracle_changes (tbl, op, old1, old2, new1, new2) VALUES ('" + table + "', "
	return []string{
		"CREATE TRIGGER " + table + "_ai AFTER INSERT ON " + table + " FOR EACH ROW " + ins + "'I', NULL, NULL, " + vals("NEW") + ")",
		"CREATE TRIGGER " + table + "_au AFTER UPDATE ON " + table + " FOR EACH ROW " + ins + "'U', " + vals("OLD") + ", " + vals("NEW") + ")",
		"CREATE TRIGGER " + table + "_ad AFTER DELETE ON " + table + " FOR EACH ROW " + ins + "'D', " + vals("OLD") + ", NULL, NULL)",
	}
}

// reseed puts the seed rows back and empties the side table (after a
// statement that committed, or at start).
func (o *oracleBed) reseed(t testing.TB) {
	t.Helper()
	for _, tb := range oracleTables {
		testbed.MustExec(t, o.direct, "DELETE FROM `"+o.db+"`."+tb.name, "INSERT INTO `"+o.db+"`."+tb.name+" VALUES "+tb.seed)
	}
	testbed.MustExec(t, o.direct, "DELETE FROM `"+o.db+"`.oracle_changes")
}

// changedKeys returns the lock names of the guarded rows the side table
// lists (old and new key of each change), as lockproxy names locks.
func (o *oracleBed) changedKeys(t testing.TB) ([]string, error) {
	t.Helper()
	rows, err := o.direct.Query("SELECT tbl, old1, old2, new1, new2 FROM `" + o.db + "`.oracle_changes ORDER BY seq")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var tbl string
		var v [4]sql.RawBytes
		if err := rows.Scan(&tbl, &v[0], &v[1], &v[2], &v[3]); err != nil {
			return nil, err
		}
		if !guardedTable(tbl) {
			continue
		}
		for _, pair := range [][2]sql.RawBytes{{v[0], v[1]}, {v[2], v[3]}} {
			if pair[0] == nil {
				continue
			}
			k, err := o.lockName(tbl, pair[0], pair[1])
			if errors.Is(err, rules.ErrUnkeyable) {
				// A row lockproxy has no key for was changed: a key no
				// session can hold stands for it, so judging fails.
				k = "(no lock key) " + err.Error()
			} else if err != nil {
				return nil, err
			}
			set[k] = true
		}
	}
	return sortedKeys(set), rows.Err()
}

func guardedTable(name string) bool {
	for _, tb := range oracleTables {
		if tb.name == name {
			return tb.guarded
		}
	}
	return false
}

// lockName is the lock lockproxy must hold for the row of table whose key
// columns hold v1 (and v2): rules.Normalize of each stored value under its
// column, as the schema lockproxy loads describes it, then rules.EncodeKey.
func (o *oracleBed) lockName(table string, v1, v2 []byte) (string, error) {
	info := o.schema.Table(o.db, table)
	if info == nil {
		return "", fmt.Errorf("no schema for %s", table)
	}
	var keys []string
	for _, tb := range oracleTables {
		if tb.name == table {
			keys = tb.keys
		}
	}
	var parts [][]byte
	for i, raw := range [][]byte{v1, v2}[:len(keys)] {
		col := info.Column(keys[i])
		v := parser.Value{Kind: parser.ValueString, Str: string(raw), Text: strconv.Quote(string(raw))}
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && !strings.Contains(col.DataType, "char") {
			v = parser.Value{Kind: parser.ValueInt, Int: n, Text: string(raw)}
		}
		b, err := rules.Normalize(col, v, rules.Assign)
		if err != nil {
			return "", fmt.Errorf("normalise %s.%s = %q: %w", table, keys[i], raw, err)
		}
		parts = append(parts, b)
	}
	key := rules.EncodeKey(strings.ToLower(o.db), table, parts)
	if o.stored == nil {
		o.stored = map[string][][]byte{}
	}
	o.stored[key] = [][]byte{append([]byte(nil), v1...), append([]byte(nil), v2...)}
	return key, nil
}

// committedChanges counts side-table rows outside any open transaction.
func (o *oracleBed) committedChanges(t testing.TB) int {
	t.Helper()
	var n int
	if err := o.direct.QueryRow("SELECT COUNT(*) FROM `" + o.db + "`.oracle_changes").Scan(&n); err != nil {
		t.Fatalf("count changes: %v", err)
	}
	return n
}

// heldKeys lists the keys the proxy session id holds, from SHOW LOCKPROXY
// LOCKS run on observer.
func heldKeys(t testing.TB, observer *sql.DB, id uint32) []string {
	t.Helper()
	rows, err := observer.Query("SHOW LOCKPROXY LOCKS")
	if err != nil {
		t.Fatalf("SHOW LOCKPROXY LOCKS: %v", err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var v [11]sql.NullString
		ptrs := make([]any, len(v))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("SHOW LOCKPROXY LOCKS: %v", err)
		}
		// key, rule, state, session, ...
		if v[2].String == "held" && v[3].String == strconv.FormatUint(uint64(id), 10) {
			set[v[0].String] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("SHOW LOCKPROXY LOCKS: %v", err)
	}
	return sortedKeys(set)
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// missing lists the keys of want not in have.
func missing(want, have []string) []string {
	in := map[string]bool{}
	for _, k := range have {
		in[k] = true
	}
	var out []string
	for _, k := range want {
		if !in[k] {
			out = append(out, k)
		}
	}
	return out
}
