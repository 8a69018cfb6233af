package proxy

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMultiplexReprepares: under multiplexing a session's prepared
// statements do not pin it. Sessions share the one primary connection
// lockproxy may open: the connection keeps a statement for every session
// lent it, and after a reset (a session that replays a SET gives it back)
// the statement is prepared again; its parameter types (sent once, as
// sysbench and other clients do) are bound again on each loan, and it
// answers what it answers directly. Long data keeps the connection until the execute, an
// open cursor until it is reset; a USE or a replayed SET since the
// prepare refuses it on another connection (1105), until the session is
// back in the state it was prepared in.
func TestMultiplexReprepares(t *testing.T) {
	one := startProxy(t, multiplexed(1))
	db := freshDB(t, one)
	testbed.MustExec(t, one.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT, b BLOB)",
		"INSERT INTO t VALUES (1, 10, NULL), (2, 20, NULL), (3, 30, NULL)")
	a := dialRaw(t, one.addr, one.bed.User, one.bed.Password, db, true)
	b := dialRaw(t, one.addr, one.bed.User, one.bed.Password, db, true)
	direct := dialRaw(t, one.bed.PrimaryAddr, one.bed.User, one.bed.Password, db, true)
	reprepared := func() float64 { return testutil.ToFloat64(one.srv.pool.bounds.m.reprepared) }
	const q = "SELECT v, CONNECTION_ID() > 0 FROM t WHERE id = ?"
	id, _ := a.prepare(q)
	did, _ := direct.prepare(q)
	execute := func(what string, bound bool, key int64) {
		t.Helper()
		_, got, err := a.execute(id, bound, key)
		_, want, werr := direct.execute(did, bound, key)
		if err != nil || werr != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: through lockproxy %v (%v), directly %v (%v)", what, got, err, want, werr)
		}
	}
	execute("first execute", true, 2)
	// The connection keeps the statement for every session lent it: the
	// other session takes it in between, prepares and closes the same
	// text, and nothing is prepared again.
	c := dialRaw(t, one.addr, one.bed.User, one.bed.Password, db, true)
	before := reprepared()
	for i := int64(1); i <= 3; i++ {
		if _, err := c.query("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		execute("execute without types after another session", false, i)
	}
	cid, _ := c.prepare(q)
	if _, rows, err := c.execute(cid, true, int64(3)); err != nil || strings.Join(rows, ",") != "30 1" {
		t.Fatalf("the other session's statement of the same text: %v %v", rows, err)
	}
	c.send(stmtPayload(mysql.COM_STMT_CLOSE, cid)...)
	execute("execute after the other session closed its statement of the same text", false, 2)
	if n := reprepared() - before; n != 0 {
		t.Errorf("lockproxy_statements_reprepared_total rose by %v on a connection that keeps the statement, want 0", n)
	}
	// A session that replays a SET has its connection reset when it
	// gives it back, which drops the statement: it is prepared again.
	if _, err := b.query("SET SESSION max_sort_length = 2000"); err != nil {
		t.Fatal(err)
	}
	before = reprepared()
	for i := int64(1); i <= 3; i++ {
		if _, err := b.query("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		execute("execute without types after a reset", false, i)
	}
	if n := reprepared() - before; n < 3 {
		t.Errorf("lockproxy_statements_reprepared_total rose by %v over 3 executes after resets, want 3", n)
	}
	if n := sampleValue(t, one.reg, "lockproxy_sessions_pinned", "reason", "prepared_statement"); n != 0 {
		t.Errorf("lockproxy_sessions_pinned{reason=prepared_statement} = %v, want 0", n)
	}

	// Long data is the connection's until the execute.
	lid, _ := a.prepare("UPDATE t SET b = ? WHERE id = 3")
	a.send(append(binary.LittleEndian.AppendUint16(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, lid), 0), "long value"...)...)
	waitPinned(t, one.reg, "prepared_statement", 1)
	if _, _, err := a.execute(lid, true, longData{}); err != nil {
		t.Fatalf("execute with long data: %v", err)
	}
	waitPinned(t, one.reg, "prepared_statement", 0)
	if rows, err := b.query("SELECT b FROM t WHERE id = 3"); err != nil || strings.Join(rows, ",") != "long value" {
		t.Errorf("the long data stored: %v %v", rows, err)
	}

	// Long data of a statement closed before its execute stays with it:
	// the connection keeps the statement for others, without it.
	sid, _ := a.prepare("UPDATE t SET b = ? WHERE id = 2")
	a.send(append(binary.LittleEndian.AppendUint16(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, sid), 0), "closed unsent"...)...)
	a.send(stmtPayload(mysql.COM_STMT_CLOSE, sid)...)
	waitPinned(t, one.reg, "prepared_statement", 0)
	oid, _ := c.prepare("UPDATE t SET b = ? WHERE id = 2")
	if _, _, err := c.execute(oid, true, "sent"); err != nil {
		t.Fatalf("execute of the same text by another session: %v", err)
	}
	if rows, err := c.query("SELECT b FROM t WHERE id = 2"); err != nil || strings.Join(rows, ",") != "sent" {
		t.Errorf("another session's execute of the same text stored %v (%v), want its own value", rows, err)
	}

	// So is a cursor until the statement is reset.
	kid, _ := a.prepare("SELECT id FROM t ORDER BY id")
	fields := a.openCursor(kid)
	waitPinned(t, one.reg, "cursor", 1)
	if rows, err := a.fetch(kid, fields, 2); err != nil || strings.Join(rows, ",") != "1,2" {
		t.Fatalf("fetch: %v %v", rows, err)
	}
	a.send(stmtPayload(mysql.COM_STMT_RESET, kid)...)
	if _, _, err := a.result(false); err != nil {
		t.Fatalf("reset: %v", err)
	}
	waitPinned(t, one.reg, "cursor", 0)

	// After USE of another database the statement still reads the
	// tables it named where it was prepared, as directly: it is prepared
	// again there, on a connection that goes back to the session's.
	for _, c := range []*rawConn{a, direct} {
		if _, err := c.query("USE mysql"); err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(1); i <= 2; i++ {
		if _, err := b.query("SELECT 1"); err != nil { // a's connection goes to b
			t.Fatal(err)
		}
		one.srv.pool.dropIdleStmts() // no connection keeps the statement
		before = reprepared()
		execute("execute after USE of another database", true, i)
		if n := reprepared() - before; n != 1 {
			t.Errorf("lockproxy_statements_reprepared_total rose by %v, want 1", n)
		}
		if rows, err := a.query("SELECT DATABASE()"); err != nil || strings.Join(rows, ",") != "mysql" {
			t.Errorf("DATABASE() after the execute: %v %v, want mysql", rows, err)
		}
	}
	for _, c := range []*rawConn{a, direct} {
		if _, err := c.query("USE " + db); err != nil {
			t.Fatal(err)
		}
	}
	execute("execute back in its database", true, 1)
	// Another sql_mode would read the text differently: refused until
	// the session is back.
	if _, err := a.query("SET sql_mode = 'ANSI_QUOTES'"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.query("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	_, _, err := a.execute(id, true, int64(1))
	wantError(t, "execute after SET sql_mode", err, 1105, true)
	if _, err := a.query("SET sql_mode = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	// A replayed SET changed since the prepare, even back to the
	// default: prepare it again.
	id, _ = a.prepare(q)
	execute("prepared again", true, 1)

	// IS_USED_LOCK() is answered for the connection the statement was
	// prepared on: a prepare that names it keeps the connection.
	a.prepare("SELECT IS_USED_LOCK('lockproxy-reprepare') = CONNECTION_ID()")
	waitPinned(t, one.reg, "user_lock", 1)
}

// TestStmtPins: an execute pins for what its text leaves, as the text
// would, and a statement whose text lockproxy cannot read pins for
// everything; long data and an open cursor hold the connection.
func TestStmtPins(t *testing.T) {
	cache := parser.NewCache(16)
	rs, err := rules.Compile(&rules.Config{}, rules.Schema{}.WithObjects(rules.Objects{Routines: []rules.Routine{
		{Schema: "db", Name: "rc", Function: true, Body: "RETURN ROW_COUNT()", BodyKnown: true},
		{Schema: "db", Name: "via", Function: true, Body: "RETURN rc() + 1", BodyKnown: true},
		{Schema: "db", Name: "plain", Function: true, Body: "RETURN 1", BodyKnown: true},
		{Schema: "db", Name: "hidden", Function: true, BodyKnown: false},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql       string
		pins      pinReason
		readsLeft bool
	}{
		{"SELECT v FROM t WHERE id = ?", 0, false},
		{"UPDATE t SET v = ? WHERE id = 1", 0, false},
		{"SELECT SQL_CALC_FOUND_ROWS v FROM t LIMIT ?", pinFoundRows, false},
		{"SELECT FOUND_ROWS()", pinFoundRows, true},
		{"SELECT ROW_COUNT()", pinUnknown, true},
		{"SELECT GET_LOCK(?, 0)", pinUserLock, false},
		{"SET @v = ?", pinUserVariable, false},
		{"SET SESSION sql_mode = ?", pinSessionVariable, false},
		{"SELECT LAST_INSERT_ID()", pinLastInsertID, false},
		{"CREATE TEMPORARY TABLE tt (a INT)", pinTemporaryTable, false},
		// Stored functions that may read ROW_COUNT() or FOUND_ROWS(),
		// themselves or through another, or whose body is not seen.
		{"SELECT rc()", pinUnknown, true},
		{"SELECT via() + ?", pinUnknown, true},
		{"SELECT hidden()", pinUnknown, true},
		{"SELECT plain(), NOW()", pinUnknown, false},
	} {
		an, err := cache.AnalyzeWith(c.sql, "db", parser.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		// A function call pins for unknown too (factPins), as in a text.
		pins, readsLeft, _ := stmtPins(an, rs, "db")
		if pins&c.pins != c.pins || c.pins == 0 && pins != 0 || readsLeft != c.readsLeft {
			t.Errorf("%s: pins %b reads left %v, want %b %v", c.sql, pins, readsLeft, c.pins, c.readsLeft)
		}
	}
	if pins, _, _ := stmtPins(nil, rs, "db"); pins != pinUnknown {
		t.Errorf("no analysis: pins %b, want unknown", pins)
	}
	tab := stmtTable{stmts: map[uint32]*stmt{1: {}, 2: {}}}
	if r := tab.holding(); r != 0 {
		t.Errorf("idle statements hold %b", r)
	}
	tab.stmts[1].longSent, tab.stmts[2].cursor = true, true
	if r := tab.holding(); r != pinPreparedStatement|pinCursor {
		t.Errorf("long data and a cursor hold %b", r)
	}
}

// TestMultiplexPrepareAtServerLimit: a client that prepares and closes
// statement after statement under a low max_prepared_stmt_count works
// through a multiplexing lockproxy as directly, although the connection
// keeps the statements it prepared for the sessions lent it after: when
// the server refuses a prepare for its limit, the connection closes what
// it keeps and prepares again.
func TestMultiplexPrepareAtServerLimit(t *testing.T) {
	one := startProxy(t, multiplexed(1))
	db := freshDB(t, one)
	admin := one.direct(t, "", "")
	var orig int
	if err := admin.QueryRow("SELECT @@GLOBAL.max_prepared_stmt_count").Scan(&orig); err != nil {
		t.Fatal(err)
	}
	var name string
	var count int
	if err := admin.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &count); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, admin, fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", count+4))
	t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", orig)) })
	for _, target := range []clientTarget{{"direct", one.bed.PrimaryAddr}, {"proxy", one.addr}} {
		c, err := client.Connect(target.addr, one.bed.User, one.bed.Password, db)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			st, err := c.Prepare(fmt.Sprintf("SELECT 1 + %d", i))
			if err != nil {
				t.Fatalf("%s: prepare %d: %v", target.name, i, err)
			}
			r, err := st.Execute()
			if err != nil {
				t.Fatalf("%s: execute %d: %v", target.name, i, err)
			}
			if v, _ := r.GetInt(0, 0); v != int64(1+i) {
				t.Fatalf("%s: statement %d answered %d", target.name, i, v)
			}
			r.Close()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	// What another connection keeps, idle, counts against the limit
	// too: a keeps its connection (a transaction) while b's prepares go
	// to the other, then a prepares with every statement closed.
	testbed.MustExec(t, admin, fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", orig))
	two := startProxy(t, multiplexed(2))
	a, err := client.Connect(two.addr, one.bed.User, one.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Connect(two.addr, one.bed.User, one.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The limit is the server's, over every connection: other tests'
	// statements (another package's, run beside this one on the same
	// server) may take the room between the count and the prepare, so a
	// refusal is tried again from the start, up to three times.
	var last error
	for try := range 3 {
		testbed.MustExec(t, admin, fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", orig))
		if _, err := a.Execute("BEGIN"); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			st, err := b.Prepare(fmt.Sprintf("SELECT 2 + %d + %d", try, i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Execute(); err != nil {
				t.Fatal(err)
			}
			_ = st.Close()
		}
		if _, err := a.Execute("COMMIT"); err != nil {
			t.Fatal(err)
		}
		if err := admin.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &count); err != nil {
			t.Fatal(err)
		}
		testbed.MustExec(t, admin, fmt.Sprintf("SET GLOBAL max_prepared_stmt_count = %d", count))
		st, err := a.Prepare(fmt.Sprintf("SELECT 3 + %d", try))
		if err == nil {
			_ = st.Close()
			return
		}
		last = err
	}
	t.Fatalf("a prepare with every client statement closed, while an idle connection keeps 4: %v", last)
}
