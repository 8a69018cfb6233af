package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestAttacks runs statements known to have slipped past lockproxy's
// analysis, through a proxy that routes reads to the bed's replica. Each
// must be refused with lockproxy's 1105 naming the rule, or run with the
// locks of every row it changes: judged by the plan oracle in a
// transaction, and in autocommit while another session holds row 1001's
// lock (then it must wait, 1205, or be refused). Afterwards the replica's
// rows must equal the primary's (no write went to the replica) and
// replication must still run.
func TestAttacks(t *testing.T) {
	// A write that reaches the replica stops replication: a bed of its own.
	o := startOracle(t, testbed.Private(t), "lockproxy_attacks", oracleOptions{replica: true})
	observer := o.p.db(t, o.db, "")
	replica := openDB(t, o.p.bed.DSN(o.p.bed.ReplicaAddr, o.db, ""))
	timeParam := binParam{mysql.MYSQL_TYPE_TIME, false, []byte{8, 0, 0, 0, 0, 0, 0, 10, 1}, "TIME 00:10:01"}
	for _, c := range []struct {
		name string
		c    oracleCase
	}{
		{"versioned comment around an unkeyed update", oracleCase{Text: "/*M!100000 UPDATE sku_stock SET stock = 0 */"}},
		{"MariaDB comment widening the condition", oracleCase{Text: "UPDATE sku_stock SET stock = 7 WHERE sku_id = 1001 /*M! OR 1=1 */"}},
		{"MariaDB comment hiding the head of an update", oracleCase{Text: "/*M! UPDATE sku_stock SET stock = 42 WHERE sku_id IN */ (SELECT 1001)"}},
		{"ANSI_QUOTES set in the same text", oracleCase{Text: "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'); UPDATE sku_stock SET stock = 7 WHERE sku_id = \"sku_id\""}},
		{"ANSI_QUOTES set before", oracleCase{Mode: "ANSI_QUOTES", Text: "UPDATE sku_stock SET stock = 7 WHERE sku_id = \"sku_id\""}},
		{"NO_BACKSLASH_ESCAPES set in the same text", oracleCase{Text: "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); UPDATE sku_stock SET stock = 7 WHERE sku_id = '1001\\' OR 1=1 -- '"}},
		{"NO_BACKSLASH_ESCAPES set before", oracleCase{Mode: "NO_BACKSLASH_ESCAPES", Text: "UPDATE sku_stock SET stock = 7 WHERE sku_id = '1001\\' OR 1=1 -- '"}},
		{"PREPARE and EXECUTE", oracleCase{Text: "PREPARE p FROM 'UPDATE sku_stock SET stock = 0'; EXECUTE p"}},
		{"EXECUTE IMMEDIATE", oracleCase{Text: "EXECUTE IMMEDIATE 'UPDATE sku_stock SET stock = 0'"}},
		{"EXECUTE USING a user variable", oracleCase{Text: "SET @k = 1001; PREPARE p FROM 'UPDATE sku_stock SET stock = 1 WHERE sku_id = ?'; EXECUTE p USING @k"}},
		{"a view", oracleCase{Text: "UPDATE v_sku SET stock = 0"}},
		{"a procedure", oracleCase{Text: "CALL p()"}},
		{"binary TIME parameter", oracleCase{Prepare: "UPDATE sku_stock SET stock = 0 WHERE sku_id = ?", Params: []binParam{timeParam}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o.reseed(t)
			o.replicaAgrees(t, replica)
			s, holder := o.session(t), o.session(t)
			if v := o.inTransaction(t, s, observer, c.c); v.failure != "" {
				t.Errorf("%s", v)
			}
			o.reseed(t)
			key, err := o.lockName("sku_stock", []byte("1001"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if v := o.underHeldLock(t, s, holder, observer, c.c, []string{key}); v.failure != "" {
				t.Errorf("%s", v)
			}
			o.replicaAgrees(t, replica)
		})
	}
}

// replicaAgrees fails t when the replica's sku_stock differs from the
// primary's once replication caught up (a write reached the replica), or
// replication no longer runs. A write on the replica stops replication at
// the primary's next transaction (the replica logged one of its own, and
// the bed runs GTID strict mode): so after a difference the seed rows are
// written again to see whether replication survives, and it is restarted
// if it did not, so the next case is judged on a working replica.
func (o *oracleBed) replicaAgrees(t *testing.T, replica *sql.DB) {
	t.Helper()
	o.replicationRuns(t, replica)
	q := "SELECT GROUP_CONCAT(sku_id, ':', stock ORDER BY sku_id) FROM `" + o.db + "`.sku_stock"
	var onPrimary, onReplica sql.NullString
	if err := o.direct.QueryRow(q).Scan(&onPrimary); err != nil {
		t.Fatal(err)
	}
	if err := replica.QueryRow(q).Scan(&onReplica); err != nil {
		t.Fatal(err)
	}
	if onPrimary == onReplica {
		return
	}
	t.Errorf("a write reached the replica: sku_stock on the primary %q, on the replica %q", onPrimary.String, onReplica.String)
	o.reseed(t)
	o.replicationRuns(t, replica)
}

// replicationRuns waits for the replica to catch up and fails t unless
// SHOW REPLICA STATUS then says both threads run; a stopped replication is
// restarted (see replicaAgrees).
func (o *oracleBed) replicationRuns(t *testing.T, replica *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	caughtUp := o.p.bed.WaitReplicaCaughtUp(ctx)
	st := replicaStatus(t, replica)
	if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
		if caughtUp != nil {
			t.Errorf("replica does not catch up: %v", caughtUp)
		}
		return
	}
	t.Errorf("replication stopped: IO %q SQL %q, last error %q", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_Error"])
	// The replica's own transaction also wrote rows the primary writes
	// later (the side table's): apply the primary's events idempotently
	// until caught up.
	testbed.MustExec(t, replica, "STOP SLAVE", "SET GLOBAL gtid_strict_mode = 0", "SET GLOBAL slave_exec_mode = 'IDEMPOTENT'", "START SLAVE")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := o.p.bed.WaitReplicaCaughtUp(ctx2); err != nil {
		t.Fatalf("replication does not recover: %v", err)
	}
	testbed.MustExec(t, replica, "SET GLOBAL gtid_strict_mode = 1", "SET GLOBAL slave_exec_mode = 'STRICT'")
}

// replicaStatus is SHOW REPLICA STATUS, column to value.
func replicaStatus(t *testing.T, replica *sql.DB) map[string]string {
	t.Helper()
	rows, err := replica.Query("SHOW REPLICA STATUS")
	if err != nil {
		t.Fatalf("SHOW REPLICA STATUS: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatal("SHOW REPLICA STATUS: the replica replicates from nothing")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for i, c := range cols {
		st[c] = vals[i].String
	}
	return st
}

// TestAttackChangeUserReleasesLocks: COM_CHANGE_USER inside a transaction
// ends it, and the locks it held must be free at once.
func TestAttackChangeUserReleasesLocks(t *testing.T) {
	o := startOracle(t, testbed.Get(t), "lockproxy_attacks_cu", oracleOptions{})
	observer := o.p.db(t, o.db, "")
	s, other := o.session(t), o.session(t)
	key, err := o.lockName("sku_stock", []byte("1003"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1003"} {
		if err := s.exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if held := heldKeys(t, observer, s.id); len(missing([]string{key}, held)) > 0 {
		t.Fatalf("before COM_CHANGE_USER the session holds %v, want %s", held, key)
	}
	if err := s.r.changeUser(o.p.bed.User, o.p.bed.Password, o.db); err != nil {
		t.Fatalf("COM_CHANGE_USER: %v", err)
	}
	if held := heldKeys(t, observer, s.id); len(held) > 0 {
		t.Errorf("after COM_CHANGE_USER answered, the session still holds %v", held)
	}
	// The rule's wait_timeout is 300ms: a lock still held makes this 1205.
	for _, q := range []string{"BEGIN", "UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = 1003", "ROLLBACK"} {
		if err := other.exec(q); err != nil {
			t.Fatalf("another session after COM_CHANGE_USER: %s: %v", q, err)
		}
	}
	if err := s.exec("SELECT 1"); err != nil {
		t.Errorf("the session after COM_CHANGE_USER: %v", err)
	}
	if n := o.committedChanges(t); n != 0 {
		t.Errorf("COM_CHANGE_USER committed the open transaction's %d changes", n)
	}
}

// TestAttackSessionState: the client character set and the current
// database a statement is read under are the server's, however the
// session changed them. In gbk, byte 0x5c after 0xbf is the second byte
// of one character, so MariaDB reads the string below as ending after it
// and the rest of the condition as `OR 1=1` (every row), where a parser
// reading bytes sees the key 1001 only. Each case must be refused with
// lockproxy's 1105 or change only rows whose locks it holds; a USE in the
// text is followed by the rest of the text, as MariaDB runs it; and with
// lower_case_table_names=0 (the bed's) `SKU_STOCK.id` is the alias's
// column, not the table sku_stock's.
func TestAttackSessionState(t *testing.T) {
	o := startOracle(t, testbed.Get(t), "lockproxy_attacks_state", oracleOptions{})
	observer := o.p.db(t, o.db, "")
	const gbkUpdate = "UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = 1001 AND 'x\xbf\\' OR 1=1 -- ' = 'x'"
	run := func(qs ...string) func(*oracleSession, *oracleBed) error {
		return func(s *oracleSession, o *oracleBed) error {
			for _, q := range qs {
				if err := s.exec(strings.ReplaceAll(q, "{db}", o.db)); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			return nil
		}
	}
	changeUser := func(collation byte) func(*oracleSession, *oracleBed) error {
		return func(s *oracleSession, o *oracleBed) error {
			return s.r.changeUserWith(o.p.bed.User, o.p.bed.Password, o.db, collation)
		}
	}
	reset := func(s *oracleSession, o *oracleBed) error {
		if err := s.exec("SET NAMES gbk"); err != nil {
			return err
		}
		s.r.send(mysql.COM_RESET_CONNECTION)
		_, _, err := s.r.result(false)
		return err
	}
	const quietFunction = "CREATE OR REPLACE FUNCTION lockproxy_quiet() RETURNS INT NO SQL BEGIN " +
		"SET SESSION session_track_system_variables = ''; SET SESSION session_track_schema = OFF; RETURN 1; END"
	for _, c := range []struct {
		name string
		c    oracleCase
		// foreseenOnly: the server reports nothing of the attack, so
		// it is run only as lockproxy runs, foreseeing changes.
		foreseenOnly bool
	}{
		{"SET NAMES gbk in the same text", oracleCase{Text: "SET NAMES gbk; " + gbkUpdate}, false},
		{"SET CHARACTER SET gbk in the same text", oracleCase{Text: "SET CHARACTER SET gbk; " + gbkUpdate}, false},
		{"executable comment setting gbk in the same text", oracleCase{Text: "/*!40101 SET NAMES gbk */; " + gbkUpdate}, false},
		{"SET NAMES gbk before", oracleCase{Setup: "SET NAMES gbk", Before: run("SET NAMES gbk"), Text: gbkUpdate}, false},
		{"SET CHARACTER SET gbk before", oracleCase{Setup: "SET CHARACTER SET gbk", Before: run("SET CHARACTER SET gbk"), Text: gbkUpdate}, false},
		{"character_set_client by number", oracleCase{Setup: "SET character_set_client = 28", Before: run("SET character_set_client = 28"), Text: gbkUpdate}, false},
		{"character_set_client from a variable", oracleCase{Setup: "SET character_set_client = @v", Before: run("SET @v = 'gbk'", "SET character_set_client = @v"), Text: gbkUpdate}, false},
		{"character_set_client from adjacent strings", oracleCase{Setup: "SET character_set_client = 'gb' 'k'", Before: run("SET character_set_client = 'gb' 'k'"), Text: gbkUpdate}, false},
		{"EXECUTE IMMEDIATE of SET NAMES", oracleCase{Setup: "EXECUTE IMMEDIATE 'SET NAMES gbk'", Before: run("EXECUTE IMMEDIATE 'SET NAMES gbk'"), Text: gbkUpdate}, false},
		{"PREPARE and EXECUTE of SET NAMES", oracleCase{Setup: "PREPARE/EXECUTE SET NAMES gbk", Before: run("PREPARE s FROM 'SET NAMES gbk'", "EXECUTE s"), Text: gbkUpdate}, false},
		{"executable comment setting gbk before", oracleCase{Setup: "/*!40101 SET NAMES gbk */", Before: run("/*!40101 SET NAMES gbk */"), Text: gbkUpdate}, false},
		{"COM_CHANGE_USER to gbk", oracleCase{Setup: "COM_CHANGE_USER with collation 28", Before: changeUser(28), Text: gbkUpdate}, false},
		{"COM_RESET_CONNECTION after gbk", oracleCase{Setup: "SET NAMES gbk, COM_RESET_CONNECTION", Before: reset, Text: gbkUpdate}, false},
		{"a procedure that sets gbk", oracleCase{Setup: "CALL of a procedure running SET NAMES gbk",
			Before: run("DROP PROCEDURE IF EXISTS set_gbk", "CREATE PROCEDURE set_gbk() SET NAMES gbk", "CALL set_gbk()"), Text: gbkUpdate}, false},
		{"SET STATEMENT character_set_client FOR", oracleCase{Text: "SET STATEMENT character_set_client = gbk FOR " + gbkUpdate}, false},
		{"USE in the text, unkeyed", oracleCase{Setup: "USE information_schema", Before: run("USE information_schema"), Text: "USE {db}; UPDATE sku_stock SET stock = stock + 1"}, false},
		{"USE in the text, keyed", oracleCase{Setup: "USE information_schema", Before: run("USE information_schema"), Text: "USE {db}; UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = 1001"}, false},
		{"alias differing from a table only in case", oracleCase{Text: "UPDATE sku_stock JOIN sku AS SKU_STOCK SET sku_stock.stock = 0 WHERE SKU_STOCK.sku_id = 7"}, false},
		{"alias differing from a table only in case, keyed", oracleCase{Text: "UPDATE sku_stock JOIN sku AS SKU_STOCK SET sku_stock.stock = 0 WHERE SKU_STOCK.sku_id = 7 AND sku_stock.sku_id = 1001"}, false},
		{"USE in a text that then fails", oracleCase{Setup: "USE information_schema, then USE {db}; a failing SELECT",
			Before: func(s *oracleSession, o *oracleBed) error {
				if err := s.exec("USE information_schema"); err != nil {
					return err
				}
				if err := s.exec("USE " + o.db + "; SELECT * FROM no_such_table"); err == nil {
					return errors.New("the failing SELECT succeeded")
				}
				return nil
			}, Text: "UPDATE sku_stock SET stock = stock + 1"}, false},
		{"USE of another database in the text", oracleCase{Text: "USE information_schema; USE {db}; UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = 1001"}, false},
		// MariaDB reports SET sql_mode but not SET @@sql_mode.
		{"SET @@sql_mode before, unreported", oracleCase{Setup: "SET @@sql_mode = ANSI_QUOTES added",
			Before: run("SET @@sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"), Text: "UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = \"sku_id\""}, true},
		// A stored function turns the server's reports off, and MariaDB
		// reports none of that: the changes after it are learnt only
		// because lockproxy then foresees them from the text again.
		{"reports turned off by a function, then SET NAMES gbk", oracleCase{Setup: "SELECT of a function turning the reports off, SET NAMES gbk",
			Before: run(quietFunction, "SELECT lockproxy_quiet()", "SET NAMES gbk"), Text: gbkUpdate}, true},
		{"reports turned off by a function, then USE", oracleCase{Setup: "USE information_schema, SELECT of a function turning the reports off, USE {db}",
			Before: run(quietFunction, "USE information_schema", "SELECT {db}.lockproxy_quiet()", "USE {db}"), Text: "UPDATE sku_stock SET stock = stock + 1"}, true},
	} {
		// foreseen: as lockproxy runs. reported: sessions forget which
		// statements may have changed their state, so only what MariaDB
		// reports in its OK packets makes them read it again.
		for _, mode := range []string{"foreseen", "reported"} {
			if c.foreseenOnly && mode == "reported" {
				continue
			}
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				o.p.srv.unforeseen.Store(mode == "reported")
				defer o.p.srv.unforeseen.Store(false)
				o.reseed(t)
				s, holder := o.session(t), o.session(t)
				if v := o.inTransaction(t, s, observer, c.c); v.failure != "" {
					t.Errorf("%s", v)
				}
				o.reseed(t)
				s = o.session(t)
				key, err := o.lockName("sku_stock", []byte("1001"), nil)
				if err != nil {
					t.Fatal(err)
				}
				if v := o.underHeldLock(t, s, holder, observer, c.c, []string{key}); v.failure != "" {
					t.Errorf("%s", v)
				}
			})
		}
	}
}

// TestAttackRefusedExecuteTypes: an execute lockproxy refused never
// reached the server, so the parameter types it bound are not the ones
// the server's statement holds. A later execute that binds no types is
// read by the server with the types of the last execute it was sent; it
// must be keyed (and run) with the same types. Here the server last saw
// INT (4 bytes) and the refused execute bound BIGINT: the 8 bytes of
// 1001 + 2^32 are row 1001 as an INT and no row as a BIGINT.
func TestAttackRefusedExecuteTypes(t *testing.T) {
	o := startOracle(t, testbed.Get(t), "lockproxy_attacks_types", oracleOptions{})
	observer := o.p.db(t, o.db, "")
	s, holder := o.session(t), o.session(t)
	o.reseed(t)
	id, _ := s.r.prepare("UPDATE sku_stock SET stock = stock + 1 WHERE sku_id = ?")
	if _, _, err := s.r.execute(id, true, int32(1002)); err != nil {
		t.Fatalf("execute binding INT: %v", err)
	}
	held, err := o.lockName("sku_stock", []byte("1003"), nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := o.readingKey(held)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", q} {
		if err := holder.exec(q); err != nil {
			t.Fatalf("holder %s: %v", q, err)
		}
	}
	_, _, err = s.r.execute(id, true, int64(1003))
	if err == nil || !strings.HasPrefix(err.Error(), "ERROR 1205") && !strings.Contains(err.Error(), "lockproxy:") {
		t.Fatalf("execute binding BIGINT while another session holds its row: %v; want lockproxy's refusal", err)
	}
	if err := holder.exec("ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	o.reseed(t)
	if err := s.exec("BEGIN"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.r.execute(id, false, int64(1001+1<<32))
	locked := heldKeys(t, observer, s.id)
	changed, cerr := o.changedKeys(t)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if err := s.exec("ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if m := missing(changed, locked); len(m) > 0 {
		t.Errorf("execute without types (%v) changed %v without their locks (held %v)", err, m, locked)
	}
}
