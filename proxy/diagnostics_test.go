package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
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
		"INSERT INTO plain VALUES (1, 'a'), (2, 'b'), (3, 'c')")
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
	}
	run := func(c *client.Conn, s step) string {
		if s.ping {
			if err := c.Ping(); err != nil {
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
