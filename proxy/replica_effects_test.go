package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// replicaWrites fails the test when the replica wrote anything of its
// own: a GTID of its server id in its binlog, a stopped SQL thread, or
// rows of log that the primary does not have.
func replicaWrites(t *testing.T, p *testProxy, db string) {
	t.Helper()
	waitReplica(t, p)
	ctx := context.Background()
	st, err := p.bed.ReplicaStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["Slave_SQL_Running"] != "Yes" || st["Last_SQL_Error"] != "" {
		t.Fatalf("replication stopped: Slave_SQL_Running %q, Last_SQL_Error %q", st["Slave_SQL_Running"], st["Last_SQL_Error"])
	}
	r := openDB(t, p.bed.DSN(p.bed.ReplicaAddr, db, ""))
	var pos string
	var sid int
	if err := r.QueryRow("SELECT @@gtid_binlog_pos, @@server_id").Scan(&pos, &sid); err != nil {
		t.Fatal(err)
	}
	for _, g := range strings.Split(pos, ",") {
		if parts := strings.Split(g, "-"); len(parts) == 3 && parts[1] == fmt.Sprint(sid) {
			t.Fatalf("the replica logged a transaction of its own: @@gtid_binlog_pos %s", pos)
		}
	}
	var onReplica, onPrimary int
	if err := r.QueryRow("SELECT COUNT(*) FROM log").Scan(&onReplica); err != nil {
		t.Fatal(err)
	}
	if err := p.direct(t, db, "").QueryRow("SELECT COUNT(*) FROM log").Scan(&onPrimary); err != nil {
		t.Fatal(err)
	}
	if onReplica != onPrimary {
		t.Fatalf("log holds %d rows on the replica, %d on the primary", onReplica, onPrimary)
	}
}

// TestReplicaNoSideEffects: reads that call stored functions, sequences,
// user locks or views of such run on the primary, and the replica never
// writes; a SET whose value a function computes runs the function once,
// on the primary, and the replica's session gets the primary's value.
func TestReplicaNoSideEffects(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""),
		"CREATE TABLE log (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(20))",
		"CREATE TABLE plain (id INT PRIMARY KEY)", "INSERT INTO plain VALUES (1), (2), (3)",
		"CREATE SEQUENCE sq",
		"CREATE FUNCTION fw() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('fw'); RETURN 1; END",
		"CREATE FUNCTION ftz() RETURNS VARCHAR(10) DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('ftz'); RETURN '+03:00'; END",
		"CREATE FUNCTION fr() RETURNS INT DETERMINISTIC READS SQL DATA RETURN (SELECT COUNT(*) FROM plain)",
		"CREATE PROCEDURE mktemp() CREATE TEMPORARY TABLE plain (id INT)",
		"CREATE FUNCTION `now`() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('now'); RETURN 6; END")
	waitReplica(t, p)
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	primaryOnly := []string{
		"SELECT fw(), @@server_id",
		"SELECT `" + db + "`.fw(), @@server_id",
		"SELECT id, @@server_id FROM plain WHERE id = fw()",
		"SELECT fr(), @@server_id",
		"SELECT NEXTVAL(sq), @@server_id",
		"SELECT NEXT VALUE FOR sq, @@server_id",
		"SELECT SETVAL(sq, 100), @@server_id",
		"SELECT LASTVAL(sq), @@server_id",
		"SELECT GET_LOCK('lockproxy_test_routing', 0), @@server_id",
		"SELECT RELEASE_LOCK('lockproxy_test_routing'), @@server_id",
		"SELECT @@tx_read_only, @@server_id",
		"SELECT @@GLOBAL.read_only, @@server_id",
	}
	for _, q := range primaryOnly {
		var v sql.NullString
		var sid int
		if err := h.QueryRow(q).Scan(&v, &sid); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if sid != primaryID {
			t.Errorf("%s: served by server %d, want the primary", q, sid)
		}
	}
	if got := serverID(t, h, "SELECT MAX(@@server_id) + 0 * LENGTH(CONCAT('a', NOW())) FROM plain"); got != replicaID {
		t.Errorf("a read of pure built-ins served by server %d, want the replica", got)
	}

	// The function of a SET runs once, on the primary; the replica reads
	// under the value it gave.
	testbed.MustExec(t, h, "SET SESSION time_zone = ftz()")
	var sid int
	var tz string
	if err := h.QueryRow("SELECT @@server_id, @@time_zone").Scan(&sid, &tz); err != nil {
		t.Fatal(err)
	}
	if sid != replicaID || tz != "+03:00" {
		t.Errorf("after SET time_zone = ftz(): server %d answered time_zone %q, want the replica with +03:00", sid, tz)
	}
	// An empty string and a number read back as literals of their type.
	testbed.MustExec(t, h, "SET SESSION sql_mode = CONCAT(''), SESSION div_precision_increment = 1 + 2")
	var mode string
	var prec int
	if err := h.QueryRow("SELECT @@server_id, @@sql_mode, @@div_precision_increment").Scan(&sid, &mode, &prec); err != nil {
		t.Fatal(err)
	}
	if sid != replicaID || mode != "" || prec != 3 {
		t.Errorf("after SET sql_mode = CONCAT(''), div_precision_increment = 1 + 2: server %d answered %q, %d; want the replica with '', 3", sid, mode, prec)
	}
	// Under ANSI_QUOTES "now"() calls the stored function now.
	testbed.MustExec(t, h, "SET SESSION sql_mode = 'ANSI_QUOTES'")
	refusedBefore := counterValue(t, p, "lockproxy_replica_write_refused_total")
	var six int
	if err := h.QueryRow(`SELECT "now"(), @@server_id`).Scan(&six, &sid); err != nil {
		t.Fatal(err)
	}
	if six != 6 || sid != primaryID {
		t.Errorf(`SELECT "now"() under ANSI_QUOTES: %d from server %d, want the stored function's 6 from the primary`, six, sid)
	}
	if got := counterValue(t, p, "lockproxy_replica_write_refused_total") - refusedBefore; got != 0 {
		t.Errorf(`SELECT "now"() under ANSI_QUOTES was sent to the replica first (%v refused writes)`, got)
	}
	var ftzRuns int
	if err := p.direct(t, db, "").QueryRow("SELECT COUNT(*) FROM log WHERE what = 'ftz'").Scan(&ftzRuns); err != nil {
		t.Fatal(err)
	}
	if ftzRuns != 1 {
		t.Errorf("ftz() ran %d times on the primary, want 1", ftzRuns)
	}
	replicaWrites(t, p, db)
}

// TestReplicaSetDefault: SET x = DEFAULT takes the global value of the
// server that runs it, so the replica's session gets the primary's value
// read back, not its own global, even where the two servers' globals
// differ.
func TestReplicaSetDefault(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	replica := openDB(t, p.bed.DSN(p.bed.ReplicaAddr, "", ""))
	var primaryPrec, replicaPrec int
	if err := p.direct(t, "", "").QueryRow("SELECT @@GLOBAL.div_precision_increment").Scan(&primaryPrec); err != nil {
		t.Fatal(err)
	}
	if err := replica.QueryRow("SELECT @@GLOBAL.div_precision_increment").Scan(&replicaPrec); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, replica, fmt.Sprintf("SET GLOBAL div_precision_increment = %d", primaryPrec+3))
	t.Cleanup(func() {
		testbed.MustExec(t, replica, fmt.Sprintf("SET GLOBAL div_precision_increment = %d", replicaPrec))
	})
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	testbed.MustExec(t, h, "SET SESSION div_precision_increment = 1", "SET SESSION div_precision_increment = DEFAULT")
	var sid, prec int
	if err := h.QueryRow("SELECT @@server_id, @@div_precision_increment").Scan(&sid, &prec); err != nil {
		t.Fatal(err)
	}
	if sid != replicaID || prec != primaryPrec {
		t.Errorf("after SET div_precision_increment = DEFAULT: server %d answered %d; want the replica with the primary's %d (the replica's own global is %d)",
			sid, prec, primaryPrec, primaryPrec+3)
	}
}

// TestReplicaSessionReadOnly: a view lockproxy does not know of (made
// behind its back) that calls a writing function is sent to the replica,
// whose read-only session refuses the write; lockproxy counts it and
// answers the client from the primary.
func TestReplicaSessionReadOnly(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	// A name no earlier run used: lockproxy read the schema at start.
	vw := fmt.Sprintf("vw_%d", time.Now().UnixNano())
	testbed.MustExec(t, p.direct(t, db, ""),
		"CREATE TABLE log (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(20))",
		"CREATE FUNCTION fw() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('fw'); RETURN 1; END",
		"CREATE VIEW "+vw+" AS SELECT fw() AS x")
	waitReplica(t, p)
	h := p.db(t, db, "")
	before := counterValue(t, p, "lockproxy_replica_write_refused_total")
	var x int
	if err := h.QueryRow("SELECT x FROM " + vw).Scan(&x); err != nil || x != 1 {
		t.Fatalf("SELECT x FROM %s: %d, %v", vw, x, err)
	}
	if got := counterValue(t, p, "lockproxy_replica_write_refused_total") - before; got != 1 {
		t.Errorf("lockproxy_replica_write_refused_total rose by %v, want 1", got)
	}
	var n int
	if err := p.direct(t, db, "").QueryRow("SELECT COUNT(*) FROM log").Scan(&n); err != nil || n != 1 {
		t.Errorf("the view's function ran %d times on the primary (%v), want 1", n, err)
	}
	replicaWrites(t, p, db)

	// A view made through lockproxy is read and known to call fw(): its
	// reads go to the primary without the replica refusing anything.
	testbed.MustExec(t, h, "CREATE VIEW vw2 AS SELECT fw() AS x")
	before = counterValue(t, p, "lockproxy_replica_write_refused_total")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got := serverID(t, h, "SELECT @@server_id + 0 * x FROM vw2"); got == primaryID &&
			counterValue(t, p, "lockproxy_replica_write_refused_total") == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a read of a view calling a writing function still goes to the replica")
		}
		before = counterValue(t, p, "lockproxy_replica_write_refused_total")
		time.Sleep(50 * time.Millisecond)
	}
	replicaWrites(t, p, db)
}

// TestReplicaPinnedByHiddenTemporaryTables: a temporary table made through
// EXECUTE IMMEDIATE, PREPARE/EXECUTE or a procedure shadows a base table
// on the primary only; the session's reads then stay there, as they do
// after dynamic SQL that changes the character set.
func TestReplicaPinnedByHiddenTemporaryTables(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""),
		"CREATE TABLE plain (id INT PRIMARY KEY)", "INSERT INTO plain VALUES (1), (2), (3)",
		"CREATE PROCEDURE mktemp() CREATE TEMPORARY TABLE plain (id INT)")
	waitReplica(t, p)
	for name, stmts := range map[string][]string{
		"execute immediate": {"EXECUTE IMMEDIATE 'CREATE TEMPORARY TABLE plain (id INT)'"},
		"prepare, execute":  {"PREPARE mk FROM 'CREATE TEMPORARY TABLE plain (id INT)'", "EXECUTE mk"},
		"call":              {"CALL mktemp()"},
		"set names":         {"EXECUTE IMMEDIATE 'SET NAMES latin1'"},
	} {
		t.Run(name, func(t *testing.T) {
			h := p.db(t, db, "")
			h.SetMaxOpenConns(1)
			if got := serverID(t, h, "SELECT @@server_id FROM plain LIMIT 1"); got != replicaID {
				t.Fatalf("before: served by %d, want the replica", got)
			}
			testbed.MustExec(t, h, stmts...)
			var n, sid int
			var cs string
			if err := h.QueryRow("SELECT COUNT(*), @@server_id, @@character_set_client FROM plain").Scan(&n, &sid, &cs); err != nil {
				t.Fatal(err)
			}
			if sid != primaryID {
				t.Errorf("served by %d, want the primary", sid)
			}
			if want := 0; name != "set names" && n != want {
				t.Errorf("SELECT COUNT(*) FROM plain: %d, want %d (the session's temporary table)", n, want)
			}
			if name == "set names" && cs != "latin1" {
				t.Errorf("character_set_client %q, want latin1", cs)
			}
		})
	}
}

// TestReplicaConnReadOnlyAfterReset: a replica connection is read-only
// when opened and again after the pool resets it, whatever the session
// that used it set.
func TestReplicaConnReadOnlyAfterReset(t *testing.T) {
	p := routedProxy(t)
	key := poolKey{addr: p.bed.ReplicaAddr, user: p.bed.User, password: p.bed.Password, readOnly: true}
	ctx := context.Background()
	b, err := p.srv.pool.get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := func(b *backendConn) string {
		t.Helper()
		v, err := b.queryValue("SELECT @@tx_read_only")
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if got := readOnly(b); got != "1" {
		t.Fatalf("a new replica connection: @@tx_read_only %s, want 1", got)
	}
	if _, err := b.queryValue("SET SESSION TRANSACTION READ WRITE"); err != nil && err != errNoRow {
		t.Fatal(err)
	}
	thread := b.threadID
	p.srv.pool.putSync(b)
	b, err = p.srv.pool.get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer p.srv.pool.put(b)
	if b.threadID != thread {
		t.Fatalf("the pool gave another connection (thread %d, want %d)", b.threadID, thread)
	}
	if got := readOnly(b); got != "1" {
		t.Errorf("a replica connection after reset: @@tx_read_only %s, want 1", got)
	}
}
