package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// answer is what a command returned, as text: its rows or its error
// code, and its warning count.
func answer(r *mysql.Result, err error) string {
	if err != nil {
		var me *mysql.MyError
		if e, ok := err.(*mysql.MyError); ok {
			me = e
			return fmt.Sprintf("error %d", me.Code)
		}
		return "error " + err.Error()
	}
	defer r.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "warnings %d;", r.Warnings)
	if r.Resultset == nil {
		return b.String()
	}
	for i := range r.Values {
		for j := range r.Values[i] {
			s, _ := r.GetString(i, j)
			b.WriteString(" " + s)
		}
		b.WriteString(";")
	}
	return b.String()
}

// diagnosticsConns makes the table plain (three rows whose s is not a
// number) in a new database, waits for the replica to have it, and
// returns a connection to that database directly and one through p.
func diagnosticsConns(t *testing.T, p *testProxy) (direct, proxied *client.Conn) {
	t.Helper()
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE plain (id INT PRIMARY KEY, s VARCHAR(3))",
		"INSERT INTO plain VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"CREATE PROCEDURE lp_set() BEGIN SET @c = 1; END")
	waitReplica(t, p)
	direct, err := client.Connect(p.bed.PrimaryAddr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	proxied, err = client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxied.Close() })
	return direct, proxied
}

// TestDiagnosticsAfterReplicaRead: SHOW WARNINGS, SHOW ERRORS, their
// COUNT(*) forms and @@warning_count/@@error_count show the diagnostics of
// the statement before them, as MariaDB shows them directly, whether a
// replica or the primary ran that statement, by text and prepared.
func TestDiagnosticsAfterReplicaRead(t *testing.T) {
	t.Run("pinned", func(t *testing.T) { diagnosticsAfterReplicaRead(t, routedProxy(t, pinned)) })
	// Multiplexed, the replica connection of a read that left warnings
	// or an error is kept until the next command, and given back at once
	// otherwise.
	t.Run("multiplexed", func(t *testing.T) { diagnosticsAfterReplicaRead(t, routedProxy(t, multiplexed(4))) })
}

func diagnosticsAfterReplicaRead(t *testing.T, p *testProxy) {
	type step struct {
		q       string
		replica bool // the statement is a read a replica serves
		prepare bool // run as a prepared statement
		ping    bool // a COM_PING first
		// useDB, fieldList: a COM_INIT_DB of the database, a
		// COM_FIELD_LIST of plain, first.
		useDB, fieldList bool
		// prepareOnly: prepared, closed, never executed.
		prepareOnly bool
	}
	steps := []step{
		{q: "SELECT CAST(s AS SIGNED) FROM plain ORDER BY id", replica: true},
		{q: "SHOW WARNINGS"},
		{q: "SHOW COUNT(*) WARNINGS"},
		{q: "SELECT @@warning_count, @@error_count"},
		{q: "SHOW WARNINGS LIMIT 1"},
		{q: "SHOW WARNINGS", ping: true},
		{q: "SELECT * FROM nosuch", replica: true},
		{q: "SHOW ERRORS"},
		{q: "SELECT @@session.error_count"},
		{q: "SHOW COUNT(*) ERRORS"},
		{q: "SHOW WARNINGS"},
		{q: "UPDATE plain SET s = s WHERE id = CAST('1x' AS SIGNED)"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT @@warning_count"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2", replica: true},
		{q: "SHOW WARNINGS", prepare: true},
		{q: "SELECT @@warning_count", prepare: true},
		{q: "SELECT CAST(s AS DOUBLE) FROM plain WHERE id = ?", replica: true, prepare: true},
		{q: "SHOW WARNINGS", prepare: true},
		{q: "SELECT 1 + 1", replica: true},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 3", replica: true},
		{q: "SET @x = 1"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT @@last_insert_id, @x"},
		{q: "SHOW WARNINGS"},
		{q: "SET @x = CAST('2x' AS SIGNED)"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 1", replica: true},
		{q: "SELECT s FROM plain WHERE id = ?", prepareOnly: true},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2", replica: true},
		{q: "SELECT @x + ?", prepareOnly: true},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 3", replica: true},
		{q: "DELETE FROM plain WHERE id = 99"},
		{q: "SHOW WARNINGS"},
		// Statements that name no table keep the area as it was,
		// transaction control too.
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 1", replica: true},
		{q: "BEGIN"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2"},
		{q: "SAVEPOINT a"},
		{q: "SHOW WARNINGS"},
		{q: "ROLLBACK TO SAVEPOINT a"},
		{q: "RELEASE SAVEPOINT a"},
		{q: "SELECT @@warning_count"},
		{q: "COMMIT"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 3", replica: true},
		{q: "ROLLBACK"},
		{q: "SHOW WARNINGS"},
		{q: "UPDATE plain SET s = s WHERE id = CAST('2x' AS SIGNED)"},
		{q: "COMMIT"},
		{q: "SHOW WARNINGS"},
		{q: "START TRANSACTION READ ONLY"},
		{q: "SHOW WARNINGS"},
		{q: "ROLLBACK"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 1", replica: true},
		{q: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"},
		{q: "SHOW WARNINGS"},
		// A derived table or CTE clears it, as a table does; DO 0 and
		// EXPLAIN SELECT 1 keep it (TestKeepsDiagnosticsOracle).
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2", replica: true},
		{q: "SELECT * FROM (SELECT 1) AS d"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 3", replica: true},
		{q: "WITH c AS (SELECT 2) SELECT * FROM c"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2", replica: true},
		{q: "SET @x = (SELECT a FROM (SELECT 1 AS a) AS d)"},
		{q: "SHOW WARNINGS"},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 1", replica: true},
		{q: "DO 0"},
		{q: "SHOW WARNINGS"},
		{q: "EXPLAIN SELECT 1"},
		{q: "SHOW WARNINGS"},
		// COM_INIT_DB and COM_FIELD_LIST keep them.
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 3", replica: true},
		{q: "SHOW WARNINGS", useDB: true},
		{q: "SELECT CAST(s AS SIGNED) FROM plain WHERE id = 2", replica: true},
		{q: "SHOW WARNINGS", fieldList: true},
		{q: "UPDATE plain SET s = s WHERE id = CAST('4x' AS SIGNED)"},
		{q: "SHOW WARNINGS", useDB: true},
		// A CALL may keep the primary's (this one does).
		{q: "UPDATE plain SET s = s WHERE id = CAST('3x' AS SIGNED)"},
		{q: "CALL lp_set()"},
		{q: "SHOW WARNINGS"},
	}
	run := func(c *client.Conn, s step) string {
		if s.ping {
			if err := c.Ping(); err != nil {
				t.Fatal(err)
			}
		}
		if s.useDB {
			if err := c.UseDB(c.GetDB()); err != nil {
				t.Fatal(err)
			}
		}
		if s.fieldList {
			if _, err := c.FieldList("plain", ""); err != nil {
				t.Fatal(err)
			}
		}
		if !s.prepare && !s.prepareOnly {
			return answer(c.Execute(s.q))
		}
		st, err := c.Prepare(s.q)
		if err != nil {
			return answer(nil, err)
		}
		defer st.Close()
		if s.prepareOnly {
			return fmt.Sprintf("prepared: %d parameters", st.ParamNum())
		}
		var args []any
		if st.ParamNum() > 0 {
			args = []any{3}
		}
		return answer(st.Execute(args...))
	}
	direct, proxied := diagnosticsConns(t, p)
	// A read the replica could not serve (unhealthy under load) runs on
	// the primary, whose diagnostics the next steps then show, as they
	// must: the answers are compared whatever served them, and the test
	// fails only when no read reached the replica at all.
	served, replicaSteps := 0, 0
	for i, s := range steps {
		kind := "query"
		if s.prepare {
			kind = "execute"
		}
		if s.replica {
			waitReplica(t, p)
			replicaSteps++
		}
		before := testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", kind))
		want, got := run(direct, s), run(proxied, s)
		if got != want {
			t.Errorf("step %d %q: through lockproxy %q, directly %q", i, s.q, got, want)
		}
		if s.replica && testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", kind)) > before {
			served++
		}
	}
	t.Logf("%d of %d reads served by the replica", served, replicaSteps)
	if served == 0 {
		t.Error("no read reached the replica: the test did not exercise it")
	}
}

// TestDiagnosticsElsewhere: a statement that reads the previous
// statement's diagnostics but runs on the primary (GET DIAGNOSTICS, a
// SELECT ... INTO or SET of @@warning_count, @@error_count in an
// expression, an EXECUTE of GET DIAGNOSTICS) is refused with lockproxy's
// 1105 when that statement was a read a replica served and left its warnings there: the primary's area
// would answer for another statement. After a statement the primary ran,
// or a read the primary served, each answers as directly. After a read
// the replica served that left nothing, each is refused or answers as
// directly (a multiplexing session that holds no primary connection
// reads the empty area of the one it borrows).
func TestDiagnosticsElsewhere(t *testing.T) {
	t.Run("pinned", func(t *testing.T) { diagnosticsElsewhere(t, routedProxy(t, pinned)) })
	t.Run("multiplexed", func(t *testing.T) { diagnosticsElsewhere(t, routedProxy(t, multiplexed(4))) })
}

func diagnosticsElsewhere(t *testing.T, p *testProxy) {
	direct, proxied := diagnosticsConns(t, p)
	// Each probe reads the diagnostics and then what it stored.
	probes := [][]string{
		{"GET DIAGNOSTICS @n = NUMBER", "SELECT @n"},
		{"GET DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT, @e = MYSQL_ERRNO", "SELECT @m, @e"},
		{"SELECT @@warning_count INTO @w", "SELECT @w"},
		{"SET @w = @@session.warning_count + 10", "SELECT @w"},
		{"SELECT @@warning_count + 100"},
		{"EXECUTE gd", "SELECT @n"},
	}
	for _, c := range []*client.Conn{direct, proxied} {
		if _, err := c.Execute("PREPARE gd FROM 'GET DIAGNOSTICS @n = NUMBER'"); err != nil {
			t.Fatal(err)
		}
	}
	refused := 0
	for _, probe := range probes {
		for _, before := range []struct {
			q       string
			replica bool
			clean   bool // leaves no warning
		}{{"SELECT CAST(s AS SIGNED) FROM plain ORDER BY id", true, false}, {"SELECT s FROM plain WHERE id = 2", true, true},
			{"UPDATE plain SET s = s WHERE id = CAST('1x' AS SIGNED)", false, false}} {
			for _, c := range []*client.Conn{direct, proxied} {
				_, _ = c.Execute("SET @n = NULL, @m = NULL, @e = NULL, @w = NULL")
			}
			if before.replica {
				waitReplica(t, p)
			}
			reads := testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "query"))
			if want, got := answer(direct.Execute(before.q)), answer(proxied.Execute(before.q)); got != want {
				t.Fatalf("%q: through lockproxy %q, directly %q", before.q, got, want)
			}
			r, err := proxied.Execute(probe[0])
			// The session counts a replica read after its answer, before
			// it reads the next command: by the probe's answer it has.
			onReplica := testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "query")) > reads
			var me *mysql.MyError
			refusal := errors.As(err, &me) && me.Code == mysql.ER_UNKNOWN_ERROR && strings.HasPrefix(me.Message, "lockproxy: ")
			switch {
			case onReplica && !before.clean:
				if !refusal {
					t.Errorf("after %q on a replica, %q: %v; want lockproxy's 1105", before.q, probe[0], err)
				}
				refused++
				continue
			case onReplica && refusal:
				continue // a clean read's area, which lockproxy cannot tell from the primary's
			}
			for i, q := range probe {
				if i > 0 {
					r, err = proxied.Execute(q)
				}
				if want, got := answer(direct.Execute(q)), answer(r, err); got != want {
					t.Errorf("after %q (on a replica: %v), %q: through lockproxy %q, directly %q", before.q, onReplica, q, got, want)
				}
			}
		}
	}
	if refused == 0 {
		t.Error("no read reached the replica: the refusal was not exercised")
	}
}

// TestKeepsDiagnosticsOracle asks MariaDB, for statements of every kind,
// whether one run after a statement that left a warning keeps that
// warning in the diagnostics area (SHOW WARNINGS still shows it), and
// checks diagnosticsEffect says the same, or, for the statements it
// cannot tell from their text (what a CALL, an EXECUTE or a stored
// function runs decides), that it says so.
func TestKeepsDiagnosticsOracle(t *testing.T) {
	p := startProxy(t, nil)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE plain (id INT PRIMARY KEY, s VARCHAR(3))",
		"INSERT INTO plain VALUES (1, 'a')",
		"CREATE FUNCTION lp_pure() RETURNS INT DETERMINISTIC NO SQL RETURN 1",
		"CREATE FUNCTION lp_reads() RETURNS INT READS SQL DATA RETURN (SELECT COUNT(*) FROM plain)",
		"CREATE FUNCTION lp_writes() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO plain VALUES (100, 'x') ON DUPLICATE KEY UPDATE s = s; RETURN 1; END",
		"CREATE PROCEDURE lp_nothing() BEGIN END",
		"CREATE PROCEDURE lp_count() BEGIN SELECT COUNT(*) INTO @c FROM plain; END",
		"CREATE PROCEDURE lp_set() BEGIN SET @c = 1; END",
		"CREATE VIEW v AS SELECT 1 AS one")
	c, err := client.Connect(p.bed.PrimaryAddr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Statements in order, with whether lockproxy can tell from the text
	// what they do to the area. What a CALL, EXECUTE, PREPARE or stored
	// function runs decides, and the parser does not read a few
	// statements: for those lockproxy says it cannot tell.
	type asked struct {
		q       string
		unknown bool
	}
	var stmts []asked
	for _, q := range []string{
		"SET @x = 1", "SET @x = (SELECT 1)", "SET @x = (SELECT id FROM plain LIMIT 1)", "SET SESSION sql_mode = @@sql_mode",
		"SET NAMES utf8mb4", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET autocommit = 1",
		"SET PASSWORD = PASSWORD('" + p.bed.Password + "')", "SELECT 1", "SELECT @@last_insert_id", "SELECT 1 FROM DUAL",
		"SELECT NOW()", "SELECT RAND()", "SELECT SLEEP(0)", "SELECT JSON_OBJECT('a', 1)", "SELECT (SELECT 1)",
		"SELECT 1 FROM DUAL WHERE EXISTS (SELECT 1)", "SELECT 1 FOR UPDATE", "SELECT 1 UNION SELECT 2",
		"SELECT CAST('1x' AS SIGNED)", "SELECT * FROM (SELECT 1) AS d", "WITH c AS (SELECT 1) SELECT * FROM c",
		"WITH c AS (SELECT 1) SELECT 1", "SELECT id FROM plain", "SELECT 1 FROM plain WHERE 1 = 0", "SELECT one FROM v",
		"SELECT COUNT(*) FROM information_schema.ENGINES", "SELECT * FROM nosuch", "BEGIN", "START TRANSACTION",
		"SAVEPOINT a", "RELEASE SAVEPOINT a", "COMMIT", "START TRANSACTION READ ONLY", "ROLLBACK", "USE " + db, "DO 0",
		"DO SLEEP(0)", "DO (SELECT id FROM plain LIMIT 1)", "DO (SELECT 0 FROM (SELECT 1) AS x)",
		"INSERT INTO plain VALUES (2, 'b')", "UPDATE plain SET s = s WHERE id = 0", "UPDATE plain SET s = 'a' WHERE id = 1",
		"DELETE FROM plain WHERE id = 0", "EXPLAIN SELECT 1", "EXPLAIN SELECT id FROM plain",
		"EXPLAIN SELECT * FROM (SELECT 1) d", "DESCRIBE plain", "FLUSH STATUS", "FLUSH PRIVILEGES", "FLUSH TABLES plain",
		"HELP 'x'", "ANALYZE TABLE plain", "LOCK TABLES plain READ", "SHOW CREATE TABLE plain", "UNLOCK TABLES",
		"DEALLOCATE PREPARE nosuch", "CREATE TEMPORARY TABLE tmp (a INT)", "DROP TEMPORARY TABLE IF EXISTS tmp",
		"KILL QUERY 0",
	} {
		stmts = append(stmts, asked{q: q})
	}
	for _, q := range []string{
		"CALL lp_nothing()", "CALL lp_count()", "CALL lp_set()", "PREPARE ps FROM 'SELECT 1'", "EXECUTE ps",
		"PREPARE ps FROM 'SELECT id FROM plain'", "EXECUTE ps", "SELECT lp_pure()", "SELECT lp_reads()",
		"SELECT lp_writes()", "SELECT CONNECTION_ID()", "SELECT GET_LOCK('x', 0)", "SELECT RELEASE_LOCK('x')", "SHOW TABLES",
		"SHOW VARIABLES LIKE 'x'", "VALUES (1)", "SELECT 1 INTO @y", "CHECK TABLE plain", "CHECKSUM TABLE plain",
		"XA START 'x'", "XA END 'x'", "XA ROLLBACK 'x'",
	} {
		stmts = append(stmts, asked{q: q, unknown: true})
	}
	stmts = append(stmts, asked{q: "DEALLOCATE PREPARE ps"})
	ask := func(q string) (effect diagEffect, kept bool, err error) {
		// 1365, division by 0: a warning no statement of the lists raises.
		if _, err := c.Execute("SELECT 1/0"); err != nil {
			t.Fatal(err)
		}
		r, err := c.Execute(q)
		if err == nil && r.Resultset != nil {
			r.Close()
		}
		w, werr := c.Execute("SHOW WARNINGS")
		if werr != nil {
			t.Fatal(werr)
		}
		raised := false
		for i := range w.Values {
			code, _ := w.GetInt(i, 1)
			kept = kept || code == 1365
			raised = raised || code != 1365
		}
		an, _ := parser.Analyze(q, db)
		return diagnosticsEffect(an, err == nil, raised), kept, err
	}
	for _, st := range stmts {
		effect, kept, err := ask(st.q)
		switch {
		case st.unknown && effect != diagUnknown:
			t.Errorf("%q: lockproxy says it knows (kept %v), MariaDB kept it %v (error %v)", st.q, effect == diagKeeps, kept, err)
		case !st.unknown && effect == diagUnknown:
			t.Errorf("%q: lockproxy cannot tell what it does to the diagnostics area; MariaDB kept it %v", st.q, kept)
		case !st.unknown && (effect == diagKeeps) != kept:
			t.Errorf("%q (error %v): lockproxy says the area is kept %v, MariaDB kept it %v", st.q, err, effect == diagKeeps, kept)
		}
	}
	// Commands: those lockproxy takes to keep the area (keepsDiagnostics,
	// keepsDiagnosticsIfOK) and one it takes to clear it, each succeeding.
	raw := func(payload ...byte) error {
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), payload...)); err != nil {
			return err
		}
		p, err := c.ReadPacket()
		if err == nil && p[0] == mysql.ERR_HEADER {
			err = fmt.Errorf("error packet %x", p)
		}
		return err
	}
	ps, err := c.Prepare("SELECT ?")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []struct {
		name string
		code byte
		run  func() error
	}{
		{"COM_PING", mysql.COM_PING, c.Ping},
		{"COM_STATISTICS", mysql.COM_STATISTICS, func() error { return raw(mysql.COM_STATISTICS) }},
		{"COM_INIT_DB", mysql.COM_INIT_DB, func() error { return c.UseDB(db) }},
		{"COM_FIELD_LIST", mysql.COM_FIELD_LIST, func() error { _, err := c.FieldList("plain", ""); return err }},
		{"COM_SET_OPTION", mysql.COM_SET_OPTION, func() error { return raw(mysql.COM_SET_OPTION, 1, 0) }},
		{"COM_STMT_CLOSE", mysql.COM_STMT_CLOSE, ps.Close},
		{"COM_RESET_CONNECTION", mysql.COM_RESET_CONNECTION, func() error { return raw(mysql.COM_RESET_CONNECTION) }},
	} {
		if _, err := c.Execute("SELECT 1/0"); err != nil {
			t.Fatal(err)
		}
		if err := cmd.run(); err != nil {
			t.Fatalf("%s: %v", cmd.name, err)
		}
		w, err := c.Execute("SHOW WARNINGS")
		if err != nil {
			t.Fatal(err)
		}
		kept := len(w.Values) == 1
		if says := keepsDiagnostics(cmd.code) || keepsDiagnosticsIfOK(cmd.code); says != kept {
			t.Errorf("%s: lockproxy says the area is kept %v, MariaDB kept it %v", cmd.name, says, kept)
		}
	}
}
