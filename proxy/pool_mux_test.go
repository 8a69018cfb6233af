package proxy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// multiplexed edits a config to multiplex at most max primary
// connections.
func multiplexed(max int) func(*rules.Config) {
	return func(c *rules.Config) {
		c.Backends.Pool.Multiplex = true
		c.Backends.Pool.MaxConnections = max
		c.Backends.Pool.WaitTimeout = rules.Duration(30 * time.Second)
	}
}

// pinned edits a config so that each session keeps the primary
// connection it logged in with (backends.pool.multiplex: false), for
// tests of what only such a session has: its backend thread between
// commands.
func pinned(c *rules.Config) { c.Backends.Pool.Multiplex = false }

// sampleValue is the value of the gauge or counter name in reg whose
// label has value (0 when there is none).
func sampleValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	return sampleWhere(t, reg, name, map[string]string{label: value})
}

// sampleWhere sums the gauges or counters name in reg whose labels have
// every value of want (0 when there is none).
func sampleWhere(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(want) {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// muxAnswer runs q on c and returns its rows as text, or the error's number
// and message.
func muxAnswer(c *sql.Conn, q string) string {
	rows, err := c.QueryContext(context.Background(), q)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return fmt.Sprintf("error %d", me.Number)
		}
		return "error " + err.Error()
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "scan " + err.Error()
		}
		for _, v := range vals {
			out = append(out, fmt.Sprintf("%v/%s", v.Valid, v.String))
		}
	}
	if err := rows.Err(); err != nil {
		return "error " + err.Error()
	}
	return strings.Join(out, ",")
}

// waitUnpinned waits until no session counts in lockproxy_sessions_pinned
// (sessions closed before end on their own goroutines).
func waitUnpinned(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sum float64
		var pinned []string
		for _, r := range pinReasons {
			if n := sampleValue(t, reg, "lockproxy_sessions_pinned", "reason", r.name); n != 0 {
				sum += n
				pinned = append(pinned, fmt.Sprintf("%s: %v", r.name, n))
			}
		}
		if sum == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions still pinned: %s", strings.Join(pinned, ", "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPinned waits until lockproxy_sessions_pinned{reason} is want: a
// client has its answer before the session that sent it gives its
// connection back and counts its reasons.
func waitPinned(t *testing.T, reg *prometheus.Registry, reason string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := sampleValue(t, reg, "lockproxy_sessions_pinned", "reason", reason)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lockproxy_sessions_pinned{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

func backendThread(t *testing.T, c *sql.Conn) int64 {
	t.Helper()
	var id int64
	if err := c.QueryRowContext(context.Background(), "SELECT @@pseudo_thread_id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMultiplexPins runs, for each reason that pins a session to its
// connection, statements that leave state on the connection, lets another
// session take every idle connection, and checks that what the next
// statement sees is what it sees directly on MariaDB, on the same backend
// connection, with the reason counted in lockproxy_sessions_pinned.
func TestMultiplexPins(t *testing.T) {
	p := startProxy(t, multiplexed(4))
	db := freshDB(t, p)
	// The statements run directly run in a twin database: neither side
	// waits for the other's locks.
	twin := db + "_twin"
	testbed.MustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS "+twin, "CREATE DATABASE "+twin)
	t.Cleanup(func() { _, _ = p.direct(t, "", "").Exec("DROP DATABASE IF EXISTS " + twin) })
	for _, name := range []string{db, twin} {
		testbed.MustExec(t, p.direct(t, name, ""), "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
			"CREATE TABLE auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)", "CREATE TABLE other (id INT)")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		reason string
		setup  []string
		check  string
		after  []string // statements that end the state: the session is free again
	}{
		{"transaction", []string{"BEGIN", "INSERT INTO t VALUES (100, 1)"}, "SELECT COUNT(*) FROM t WHERE id = 100", []string{"ROLLBACK"}},
		{"autocommit_off", []string{"SET autocommit = 0", "INSERT INTO t VALUES (101, 1)"}, "SELECT COUNT(*) FROM t WHERE id = 101", []string{"ROLLBACK", "SET autocommit = 1"}},
		{"temporary_table", []string{"CREATE TEMPORARY TABLE tmp (a INT)", "INSERT INTO tmp VALUES (7)"}, "SELECT a FROM tmp", nil},
		{"user_variable", []string{"SET @v = 42"}, "SELECT @v", nil},
		{"user_variable", []string{"SELECT @w := v FROM t WHERE id = 2"}, "SELECT @w", nil},
		{"prepared_statement", []string{"PREPARE ps FROM 'SELECT v FROM t WHERE id = ?'"}, "EXECUTE ps USING 3", nil},
		// A SET of a variable not replayed on another connection (see
		// TestMultiplexReplaysSessionVariables for those that are).
		{"session_variable", []string{"SET SESSION insert_id = 500"}, "SELECT @@session.insert_id", nil},
		{"session_variable", []string{"SET SESSION max_sort_length = 1000 + 1000"}, "SELECT @@session.max_sort_length", nil},
		{"user_lock", []string{"SELECT GET_LOCK(CONCAT('mux-', @@hostname, CONNECTION_ID()), 0)"}, "SELECT RELEASE_LOCK(CONCAT('mux-', @@hostname, CONNECTION_ID()))", nil},
		{"lock_tables", []string{"LOCK TABLES t READ"}, "SELECT COUNT(*) FROM other", []string{"UNLOCK TABLES"}},
		{"found_rows", []string{"SELECT SQL_CALC_FOUND_ROWS id FROM t ORDER BY id LIMIT 1"}, "SELECT FOUND_ROWS()", nil},
		{"last_insert_id", []string{"INSERT INTO auto (v) VALUES (1)", "SELECT 1"}, "SELECT LAST_INSERT_ID() > 0", nil},
		{"diagnostics", []string{"SELECT 1/0"}, "SHOW WARNINGS", nil},
		// A statement that names no table leaves the warnings before it.
		{"diagnostics", []string{"SELECT 1/0", "SELECT 1 + 1"}, "SHOW WARNINGS", nil},
		{"cursor", []string{"HANDLER t OPEN"}, "HANDLER t READ `PRIMARY` FIRST", nil},
		{"unknown", []string{"DO SLEEP(0)"}, "SELECT 1", nil},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			waitUnpinned(t, p.reg)
			c, err := p.db(t, db, "").Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Raw(func(any) error { return errDriverBadConn }); _ = c.Close() }()
			d, err := p.direct(t, twin, "").Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Raw(func(any) error { return errDriverBadConn }); _ = d.Close() }()
			for _, q := range tc.setup {
				if a, b := muxAnswer(c, q), muxAnswer(d, q); a != b {
					t.Fatalf("%s: through lockproxy %q, directly %q", q, a, b)
				}
			}
			// Other sessions take every other connection and hold it: a
			// session that gave its connection back would get another,
			// or one reset, or none.
			others := p.db(t, db, "")
			for i := 0; i < 3; i++ {
				o, err := others.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = o.Raw(func(any) error { return errDriverBadConn }); _ = o.Close() }()
				mustConnExec(t, o, "BEGIN", "SELECT 1")
			}
			want := 1.0
			if tc.reason == "transaction" {
				want += 3
			}
			waitPinned(t, p.reg, tc.reason, want)
			if got, want := muxAnswer(c, tc.check), muxAnswer(d, tc.check); got != want {
				t.Errorf("%s after %v: through lockproxy %q, directly %q", tc.check, tc.setup, got, want)
			}
			if tc.after != nil {
				mustConnExec(t, c, tc.after...)
				waitPinned(t, p.reg, tc.reason, want-1)
			}
		})
	}
	t.Run("free sessions share a connection", func(t *testing.T) {
		one := startProxy(t, multiplexed(1))
		a, err := one.db(t, db, "").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := one.db(t, db, "").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		firstA, firstB := muxAnswer(a, "SELECT CONNECTION_ID()"), muxAnswer(b, "SELECT CONNECTION_ID()")
		if ta, tb := backendThread(t, a), backendThread(t, b); ta != tb {
			t.Errorf("two free sessions on max_connections 1 ran on backend threads %d and %d", ta, tb)
		}
		if firstA == firstB || muxAnswer(a, "SELECT CONNECTION_ID()") != firstA {
			t.Errorf("CONNECTION_ID() is not each session's own: %s, %s", firstA, firstB)
		}
		// USE follows the session to the connection it borrows next.
		mustConnExec(t, a, "USE mysql")
		if got := muxAnswer(b, "SELECT DATABASE()"); got != "true/"+db {
			t.Errorf("DATABASE() of the other session after USE mysql: %s", got)
		}
		if got := muxAnswer(a, "SELECT DATABASE()"); got != "true/mysql" {
			t.Errorf("DATABASE() after USE mysql: %s", got)
		}
	})
	t.Run("reads of a statement given back are refused", func(t *testing.T) {
		c, err := p.db(t, db, "multiStatements=true").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mustConnExec(t, c, "SELECT id FROM t LIMIT 1")
		_, err = c.ExecContext(ctx, "SELECT FOUND_ROWS()")
		if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
			t.Fatalf("want lockproxy's 1105, got %v", me)
		}
		// In one text the statements share a connection.
		if got := muxAnswer(c, "SELECT id FROM t ORDER BY id LIMIT 2; SELECT FOUND_ROWS()"); got == "" || strings.HasPrefix(got, "error") {
			t.Fatalf("one text: %s", got)
		}
	})
}

// TestMultiplexReplaysSessionVariables: a multiplexing session that sets
// session variables to literals is not pinned for them: they are replayed
// on each connection it borrows (here the only one, which another session
// uses in between and sees reset), and the session sees its values as it
// would directly; one not replayed pins it.
func TestMultiplexReplaysSessionVariables(t *testing.T) {
	one := startProxy(t, multiplexed(1))
	db := freshDB(t, one)
	ctx := context.Background()
	conn := func(p *testProxy) *sql.Conn {
		c, err := p.db(t, db, "").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Raw(func(any) error { return errDriverBadConn }); _ = c.Close() })
		return c
	}
	c, other := conn(one), conn(one)
	d, err := one.direct(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const check = "SELECT @@session.max_sort_length, @@session.time_zone, @@session.tx_isolation, @@session.character_set_client, @@session.sql_mode"
	defaults := muxAnswer(d, check)
	sets := []string{
		"SET SESSION max_sort_length = 2000", "SET time_zone = '+03:00'",
		"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET NAMES latin1",
		"SET sql_mode = 'NO_ENGINE_SUBSTITUTION'", "SET SESSION max_sort_length = 3000",
	}
	for _, q := range sets {
		if a, b := muxAnswer(c, q), muxAnswer(d, q); a != b {
			t.Fatalf("%s: through lockproxy %q, directly %q", q, a, b)
		}
	}
	want := muxAnswer(d, check)
	if want == defaults {
		t.Fatalf("the SETs changed nothing directly: %s", want)
	}
	for i := 0; i < 3; i++ {
		if got := muxAnswer(other, check); got != defaults {
			t.Errorf("round %d: another session on the same connection sees %s, want the defaults %s", i, got, defaults)
		}
		if got := muxAnswer(c, check); got != want {
			t.Errorf("round %d: the session sees %s, want %s as directly", i, got, want)
		}
	}
	if n := sampleValue(t, one.reg, "lockproxy_sessions_pinned", "reason", "session_variable"); n != 0 {
		t.Errorf("lockproxy_sessions_pinned{reason=session_variable} = %v, want 0: the SETs are replayed", n)
	}
	// A variable that is not replayed pins the session.
	mustConnExec(t, c, "SET SESSION insert_id = 7")
	waitPinned(t, one.reg, "session_variable", 1)
}

// TestMultiplexManyClients runs 500 client connections on at most 20
// primary connections: MariaDB never sees more, and no client errs.
func TestMultiplexManyClients(t *testing.T) {
	const clients, limit = 500, 20
	p := startProxy(t, multiplexed(limit))
	db := freshDB(t, p)
	direct := p.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)", "INSERT INTO counter VALUES (1, 0)")
	through := p.db(t, db, "")
	through.SetMaxOpenConns(clients)
	through.SetMaxIdleConns(clients)
	ctx := context.Background()
	threads := func() int {
		var name string
		var n int
		if err := direct.QueryRow("SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := threads() // this test's own connection, the proxy's idle one, other clients of the bed
	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := int64(threads()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	conns := make([]*sql.Conn, clients)
	dial := make(chan struct{}, 32) // logins in flight: under proxy.max_handshakes
	var wg sync.WaitGroup
	var errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			dial <- struct{}{}
			c, err := through.Conn(ctx)
			<-dial
			if err != nil {
				fail(err)
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	for i, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func(i int, c *sql.Conn) {
			defer wg.Done()
			for j := 0; j < 4; j++ {
				var v int
				if err := c.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&v); err != nil {
					fail(err)
					return
				}
				tx, err := c.BeginTx(ctx, nil)
				if err == nil {
					_, err = tx.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1")
					if err == nil {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}(i, c)
	}
	wg.Wait()
	close(stop)
	<-watched
	for _, c := range conns {
		if c != nil {
			_ = c.Close()
		}
	}
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d client errors, the first: %v", n, firstErr.Load())
	}
	var n int
	if err := direct.QueryRow("SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil || n != clients*4 {
		t.Fatalf("counter = %d (%v), want %d", n, err, clients*4)
	}
	if grew := int(peak.Load()) - base; grew > limit {
		t.Fatalf("MariaDB's Threads_connected rose from %d to %d: more than max_connections %d", base, peak.Load(), limit)
	}
	t.Logf("%d clients: Threads_connected %d -> peak %d (max_connections %d); waits got %v, timed out %v", clients, base, peak.Load(), limit,
		sampleValue(t, p.reg, "lockproxy_backend_connection_waits_total", "outcome", "got"),
		sampleValue(t, p.reg, "lockproxy_backend_connection_waits_total", "outcome", "timeout"))
}

// TestMultiplexFlashSale runs a guarded read-then-write sale with
// multiplexing on: no oversell, no lost update.
func TestMultiplexFlashSale(t *testing.T) {
	const buyers, stock = 120, 50
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"CREATE TABLE orders (buyer VARCHAR(64) PRIMARY KEY)", fmt.Sprintf("INSERT INTO sku VALUES (1, %d)", stock))
	p := guardedProxyWith(t, db, func(r *rules.Rule) { r.WaitTimeout = rules.Duration(20 * time.Second) }, multiplexed(8))
	through := p.db(t, db, "")
	through.SetMaxOpenConns(buyers)
	ctx := context.Background()
	var wg sync.WaitGroup
	var sold, errs atomic.Int64
	var firstErr atomic.Value
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := func() error {
				tx, err := through.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback() }()
				var left int
				if err := tx.QueryRowContext(ctx, "SELECT stock FROM sku WHERE sku_id = 1").Scan(&left); err != nil {
					return err
				}
				if left <= 0 {
					return tx.Commit()
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE sku SET stock = %d WHERE sku_id = 1", left-1)); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO orders VALUES ('buyer-%d')", i)); err != nil {
					return err
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				sold.Add(1)
				return nil
			}()
			if err != nil && errs.Add(1) == 1 {
				firstErr.Store(err)
			}
		}(i)
	}
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d buyers failed, the first: %v", n, firstErr.Load())
	}
	var left, orders int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if err := direct.QueryRow("SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != stock || left != 0 || int(sold.Load()) != orders {
		t.Fatalf("stock %d -> %d, %d orders, %d sales answered: oversold or lost updates", stock, left, orders, sold.Load())
	}
}

// TestMultiplexKillIdle: a session between commands holds no backend
// connection, so no MariaDB thread; a KILL of it by its own user still
// does what MariaDB's does: KILL QUERY stops nothing and leaves it
// working, KILL CONNECTION ends its client connection.
func TestMultiplexKillIdle(t *testing.T) {
	p := startProxy(t, multiplexed(4))
	ctx := context.Background()
	db := p.db(t, "", "")
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := p.db(t, "", "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var id int64
	if err := b.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if got := muxAnswer(a, fmt.Sprintf("KILL QUERY %d", id)); strings.HasPrefix(got, "error") {
		t.Fatalf("KILL QUERY of an idle session: %s", got)
	}
	if got := muxAnswer(b, "SELECT 7"); !strings.Contains(got, "true/7") {
		t.Fatalf("after KILL QUERY the session answers %q, want 7", got)
	}
	if got := muxAnswer(a, fmt.Sprintf("KILL %d", id)); strings.HasPrefix(got, "error") {
		t.Fatalf("KILL of an idle session: %s", got)
	}
	if _, err := b.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("the killed session still answers")
	}
	// The session ends once its goroutine has seen its connection
	// closed and given back what it held; until then it is still
	// there to KILL, as a killed MariaDB thread is until it has
	// cleaned up. Then it is unknown.
	testbed.EventuallyWhy(t, 10*time.Second, "KILL of the ended session answers 1094", func() (bool, string) {
		got := muxAnswer(a, fmt.Sprintf("KILL %d", id))
		return got == "error 1094", got
	})
}

// TestMultiplexIdleWaitTimeout: a multiplexing session that holds no
// primary connection is closed after its wait_timeout idle, as MariaDB
// closes an idle connection directly (a pool's liveness check expects
// it), and one that keeps talking is not.
func TestMultiplexIdleWaitTimeout(t *testing.T) {
	p := startProxy(t, multiplexed(4))
	db := freshDB(t, p)
	ctx := context.Background()
	for _, side := range []struct {
		name string
		db   *sql.DB
	}{{"direct", p.direct(t, db, "")}, {"multiplexed", p.db(t, db, "")}} {
		idle, err := side.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		busy, err := side.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Margins for a busy machine: the idle session waits a second
		// past its wait_timeout, the busy one talks every quarter of it.
		// SET @@ is a spelling MariaDB's session tracking does not report.
		mustConnExec(t, idle, "SET @@wait_timeout = 2")
		mustConnExec(t, busy, "SET SESSION wait_timeout = 2")
		for range 12 {
			time.Sleep(250 * time.Millisecond)
			mustConnExec(t, busy, "SELECT 1")
		}
		if _, err := idle.ExecContext(ctx, "SELECT 1"); err == nil {
			t.Errorf("%s: a session idle for twice its wait_timeout still answers", side.name)
		}
		_ = idle.Raw(func(any) error { return errDriverBadConn })
		_ = idle.Close()
		_ = busy.Close()
	}
}

// TestMultiplexWaitTimeoutRowCount: a SET @@wait_timeout, which MariaDB
// does not report, in a session that keeps its connection leaves
// ROW_COUNT() and FOUND_ROWS() of the next command as directly: lockproxy
// asks for the value only when the session gives its connection back.
func TestMultiplexWaitTimeoutRowCount(t *testing.T) {
	p := startProxy(t, multiplexed(4))
	db := freshDB(t, p)
	ctx := context.Background()
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1), (2), (3)")
	var answers []string
	for _, side := range []*sql.DB{p.direct(t, db, ""), p.db(t, db, "")} {
		c, err := side.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, q := range []string{"BEGIN", "SELECT * FROM t", "SET @@wait_timeout = 100", "SELECT ROW_COUNT(), FOUND_ROWS()",
			"COMMIT", "SET @@wait_timeout = 200", "SELECT @@session.wait_timeout"} {
			got = append(got, q+" → "+muxAnswer(c, q))
		}
		_ = c.Close()
		answers = append(answers, strings.Join(got, "\n"))
	}
	if answers[0] != answers[1] {
		t.Errorf("directly:\n%s\nthrough lockproxy:\n%s", answers[0], answers[1])
	}
}

// TestMultiplexTransactionCharacteristics: the session's isolation level
// and access mode are two settings replayed on every connection it
// borrows: a SET of one does not replace an earlier SET of the other, and
// SET TRANSACTION without a scope (the next transaction only) changes
// neither, as on the session's own connection directly.
func TestMultiplexTransactionCharacteristics(t *testing.T) {
	one := startProxy(t, multiplexed(1))
	db := freshDB(t, one)
	ctx := context.Background()
	c, err := one.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := one.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	d, err := one.direct(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const check = "SELECT @@session.tx_isolation, @@session.tx_read_only"
	pinned := false
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", check,
		"SET SESSION tx_isolation = 'SERIALIZABLE'", check, "SET SESSION TRANSACTION READ ONLY", check,
		"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", check, "SET SESSION TRANSACTION READ WRITE", check,
		"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", check} {
		if a, b := muxAnswer(c, q), muxAnswer(d, q); a != b {
			t.Errorf("%s: through lockproxy %q, directly %q", q, a, b)
		}
		if pinned = pinned || strings.HasPrefix(q, "SET TRANSACTION"); pinned {
			continue // the next transaction's characteristics pin the session's connection
		}
		// The one primary connection goes to another session in between,
		// which sees the defaults.
		if got := muxAnswer(other, check); got != "true/REPEATABLE-READ,true/0" {
			t.Errorf("after %s: another session sees %s, want the defaults", q, got)
		}
	}
}

// TestMultiplexStoredFunctionReadsRowCount: a stored function that reads
// ROW_COUNT(), made through lockproxy by a multiplexing session with no
// rules and no replicas, is known at once: called first in a command on
// a connection the previous statement did not run on, it is refused
// (1105) rather than answer another connection's count; in the same
// transaction as the statement it counts, it answers as directly.
func TestMultiplexStoredFunctionReadsRowCount(t *testing.T) {
	p := startProxy(t, multiplexed(4))
	db := freshDB(t, p)
	ctx := context.Background()
	c, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The DDL the parser does not read pins the session that ran it
	// (unknown): another one calls the functions.
	ddl, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ddl.Close()
	// Names the schema read when lockproxy started cannot know, even on
	// a bed an earlier run left them on.
	count, plain := fmt.Sprintf("lp_count_%d", time.Now().UnixNano()), fmt.Sprintf("lp_plain_%d", time.Now().UnixNano())
	mustConnExec(t, ddl, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
		"CREATE FUNCTION "+count+"() RETURNS BIGINT NOT DETERMINISTIC NO SQL RETURN ROW_COUNT()",
		"CREATE FUNCTION "+plain+"() RETURNS BIGINT NOT DETERMINISTIC NO SQL RETURN 7")
	mustConnExec(t, c, "UPDATE t SET v = v + 1")
	_, err = c.ExecContext(ctx, "SELECT "+count+"()")
	if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "stored function") {
		t.Fatalf("want lockproxy's 1105 for a function reading ROW_COUNT(), got %v", me)
	}
	mustConnExec(t, c, "BEGIN", "UPDATE t SET v = v + 1 WHERE id < 3")
	if got := muxAnswer(c, "SELECT "+count+"()"); got != "true/2" {
		t.Errorf("in one transaction with the UPDATE: %s, want 2", got)
	}
	mustConnExec(t, c, "COMMIT")
	if got := muxAnswer(c, "SELECT "+plain+"()"); got != "true/7" {
		t.Errorf("a function that reads nothing left: %s, want 7", got)
	}
}
