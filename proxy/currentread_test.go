package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// bankProxy starts a proxy with the default rule (write, locking_read,
// read_in_txn) on db.bank_acct(id), over accounts 0..3 of 1000 and a table
// no rule guards.
func bankProxy(t *testing.T) (*testProxy, string) {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE bank_acct (id INT PRIMARY KEY, bal INT NOT NULL)",
		"INSERT INTO bank_acct VALUES (0, 1000), (1, 1000), (2, 1000), (3, 1000)",
		"CREATE TABLE plain (id INT PRIMARY KEY, v INT)",
		"INSERT INTO plain VALUES (1, 1)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "bank", Table: db + ".bank_acct", Key: []string{"id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(2 * time.Second)}}
	}, memlock.New(nil, nil))
	return p, db
}

// TestLockedReadIsCurrent: a plain SELECT in a transaction that takes the
// row's lock answers the row as it is now, not as the transaction's
// REPEATABLE READ snapshot saw it before the lock; the write computed from
// it loses no other session's update. Each variant starts the snapshot
// before another session changes the row, then reads and writes it back.
func TestLockedReadIsCurrent(t *testing.T) {
	p, db := bankProxy(t)
	h, direct := p.db(t, db, ""), p.direct(t, db, "")
	ctx := context.Background()
	variants := []struct {
		name  string
		setup []string // on B's connection, before its transaction
		begin string
		first string // B's first read, which starts its snapshot
		read  string // B's read of row 1 after C's update; %d is row 1's id
	}{
		{name: "second guarded row", begin: "BEGIN", first: "SELECT bal FROM bank_acct WHERE id = 0", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "first read of an unguarded table", begin: "BEGIN", first: "SELECT v FROM plain WHERE id = 1", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "with consistent snapshot", begin: "START TRANSACTION WITH CONSISTENT SNAPSHOT", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "join of two guarded rows", begin: "BEGIN", first: "SELECT bal FROM bank_acct WHERE id = 0",
			read: "SELECT b.bal FROM bank_acct a JOIN bank_acct b ON b.id = %d WHERE a.id = 0"},
		{name: "serializable", setup: []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, begin: "BEGIN",
			first: "SELECT bal FROM bank_acct WHERE id = 0", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "read committed", setup: []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"}, begin: "BEGIN",
			first: "SELECT bal FROM bank_acct WHERE id = 0", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "autocommit off", setup: []string{"SET autocommit = 0"}, begin: "SELECT 1",
			first: "SELECT bal FROM bank_acct WHERE id = 0", read: "SELECT bal FROM bank_acct WHERE id = %d"},
		{name: "comment after the read", begin: "BEGIN", first: "SELECT bal FROM bank_acct WHERE id = 0",
			read: "SELECT bal FROM bank_acct WHERE id = %d -- the clause must not land in here"},
		// Every query block that reads the table is a current read; the
		// first read has the same shape, so the text of the second is
		// planned from the shape's cached analysis.
		{name: "scalar subquery", begin: "BEGIN", first: "SELECT (SELECT bal FROM bank_acct WHERE id = 0) AS b",
			read: "SELECT (SELECT bal FROM bank_acct WHERE id = %d) AS b"},
		{name: "derived table", begin: "BEGIN", first: "SELECT d.bal FROM (SELECT bal FROM bank_acct WHERE id = 0) AS d",
			read: "SELECT d.bal FROM (SELECT bal FROM bank_acct WHERE id = %d) AS d"},
		{name: "cte", begin: "BEGIN", first: "WITH c AS (SELECT bal FROM bank_acct WHERE id = 0) SELECT bal FROM c",
			read: "WITH c AS (SELECT bal FROM bank_acct WHERE id = %d) SELECT bal FROM c"},
		{name: "union", begin: "BEGIN", first: "SELECT bal FROM bank_acct WHERE id = 0 UNION SELECT v FROM plain WHERE id = 99",
			read: "SELECT bal FROM bank_acct WHERE id = %d UNION SELECT v FROM plain WHERE id = 99"},
		{name: "union in parentheses", begin: "BEGIN", first: "(SELECT v FROM plain WHERE id = 99) UNION ALL (SELECT bal FROM bank_acct WHERE id = 0) ORDER BY 1 LIMIT 1",
			read: "(SELECT v FROM plain WHERE id = 99) UNION ALL (SELECT bal FROM bank_acct WHERE id = %d) ORDER BY 1 LIMIT 1"},
		{name: "in subquery", begin: "BEGIN", first: "SELECT bal FROM bank_acct WHERE id = 0 AND id NOT IN (SELECT id FROM plain WHERE id > 5)",
			read: "SELECT bal FROM bank_acct WHERE id = %d AND id NOT IN (SELECT id FROM plain WHERE id > 5)"},
		{name: "locking read with a plain subquery", begin: "BEGIN", first: "SELECT (SELECT bal FROM bank_acct WHERE id = 0) FROM bank_acct WHERE id = 0 FOR UPDATE",
			read: "SELECT (SELECT bal FROM bank_acct WHERE id = %d) FROM bank_acct WHERE id = 0 FOR UPDATE"},
	}
	for _, prepared := range []bool{false, true} {
		for _, v := range variants {
			name := v.name + map[bool]string{false: "/text", true: "/prepared"}[prepared]
			t.Run(name, func(t *testing.T) {
				testbed.MustExec(t, direct, "UPDATE bank_acct SET bal = 1000")
				b, c := conn(t, h), conn(t, h)
				for _, q := range v.setup {
					if _, err := b.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := b.ExecContext(ctx, v.begin); err != nil {
					t.Fatal(err)
				}
				if v.first != "" {
					var x int
					if err := b.QueryRowContext(ctx, v.first).Scan(&x); err != nil {
						t.Fatalf("%s: %v", v.first, err)
					}
				}
				if _, err := c.ExecContext(ctx, "UPDATE bank_acct SET bal = bal + 100 WHERE id = 1"); err != nil {
					t.Fatal(err)
				}
				var bal int
				var err error
				if prepared {
					q := strings.Replace(v.read, "%d", "?", 1)
					err = b.QueryRowContext(ctx, q, 1).Scan(&bal)
				} else {
					err = b.QueryRowContext(ctx, fmt.Sprintf(v.read, 1)).Scan(&bal)
				}
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if bal != 1100 {
					t.Errorf("locked read answered %d, the row is 1100 (a snapshot older than the lock)", bal)
				}
				if _, err := b.ExecContext(ctx, fmt.Sprintf("UPDATE bank_acct SET bal = %d WHERE id = 1", bal+5)); err != nil {
					t.Fatal(err)
				}
				if _, err := b.ExecContext(ctx, "COMMIT"); err != nil {
					t.Fatal(err)
				}
				var final int
				if err := h.QueryRowContext(ctx, "SELECT bal FROM bank_acct WHERE id = 1").Scan(&final); err != nil {
					t.Fatal(err)
				}
				if final != 1105 {
					t.Errorf("final balance %d, want 1105 (C's +100 lost)", final)
				}
			})
		}
	}
}

// TestLockedReadRefusedWhenNotCurrent: a read in a transaction that takes
// row locks but that lockproxy cannot make a current read is refused,
// never answered from the snapshot.
func TestLockedReadRefusedWhenNotCurrent(t *testing.T) {
	p, db := bankProxy(t)
	h := p.db(t, db, "")
	ctx := context.Background()
	for _, q := range []string{
		"SELECT bal FROM bank_acct WHERE id = 1 INTO OUTFILE '/nonexistent/lockproxy-test'",
		"SELECT d.bal FROM (SELECT bal FROM bank_acct WHERE id = 1) d INTO OUTFILE '/nonexistent/lockproxy-test'",
	} {
		b := conn(t, h)
		if _, err := b.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		rows, err := b.QueryContext(ctx, q)
		if err == nil {
			rows.Close()
			t.Errorf("%s: ran; want lockproxy's refusal", q)
			continue
		}
		me := mysqlErr(t, err)
		if me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy: rule bank:") || !strings.Contains(me.Message, "LOCK IN SHARE MODE") {
			t.Errorf("%s: %v; want 1105 naming the rule and the fix", q, me)
		}
		if _, err := b.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
	// The same texts in autocommit take no row lock and run.
	for _, q := range []string{"SELECT bal FROM bank_acct WHERE id = 1 UNION SELECT bal FROM bank_acct WHERE id = 2"} {
		rows, err := h.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s in autocommit: %v", q, err)
		}
		rows.Close()
	}
}

// TestLockedReadPreparedElsewhere: the current-read twin of a prepared
// read is prepared when first needed; after USE of another database it
// would name other tables, so the execute is refused, never run.
func TestLockedReadPreparedElsewhere(t *testing.T) {
	p, db := bankProxy(t)
	ctx := context.Background()
	b := conn(t, p.db(t, db, ""))
	st, err := b.PrepareContext(ctx, "SELECT bal FROM bank_acct WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range []string{"USE mysql", "BEGIN"} {
		if _, err := b.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var bal int
	err = st.QueryRowContext(ctx, 1).Scan(&bal)
	me := mysqlErr(t, err)
	if me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy: rule bank:") || !strings.Contains(me.Message, "prepare it again") {
		t.Fatalf("execute after USE: %v; want lockproxy's refusal", me)
	}
	for _, q := range []string{"ROLLBACK", "USE " + db, "BEGIN"} {
		if _, err := b.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.QueryRowContext(ctx, 1).Scan(&bal); err != nil || bal != 1000 {
		t.Fatalf("execute back in its database: %d, %v", bal, err)
	}
}

// TestLockedReadIsCurrentReadOnly: a read-only transaction takes the rows'
// locks like any other and its locked reads are current reads too (InnoDB
// allows LOCK IN SHARE MODE there), however the transaction was made
// read-only: lockproxy does not rely on a read-only snapshot being
// consistent (under concurrent transfers MariaDB 10.11's were measured
// seeing half of a committed transfer). While B holds row 1's lock, C's
// write of it waits and times out.
func TestLockedReadIsCurrentReadOnly(t *testing.T) {
	p, db := bankProxy(t)
	h, direct := p.db(t, db, ""), p.direct(t, db, "")
	ctx := context.Background()
	variants := []struct {
		name  string
		setup []string
		begin string
	}{
		{name: "start transaction read only", begin: "START TRANSACTION READ ONLY"},
		{name: "read only with consistent snapshot", begin: "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT"},
		{name: "set transaction read only", setup: []string{"SET TRANSACTION READ ONLY"}, begin: "BEGIN"},
		{name: "session read only", setup: []string{"SET SESSION TRANSACTION READ ONLY"}, begin: "BEGIN"},
		{name: "session variable", setup: []string{"SET SESSION tx_read_only = 1"}, begin: "BEGIN"},
		{name: "serializable read only", setup: []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, begin: "START TRANSACTION READ ONLY"},
	}
	for _, prepared := range []bool{false, true} {
		for _, v := range variants {
			name := v.name + map[bool]string{false: "/text", true: "/prepared"}[prepared]
			t.Run(name, func(t *testing.T) {
				testbed.MustExec(t, direct, "UPDATE bank_acct SET bal = 1000")
				b, c := conn(t, h), conn(t, h)
				t.Cleanup(func() {
					_, _ = b.ExecContext(ctx, "ROLLBACK")
					_, _ = b.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE")
				})
				for _, q := range append(v.setup, v.begin) {
					if _, err := b.ExecContext(ctx, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				var x int
				if err := b.QueryRowContext(ctx, "SELECT bal FROM bank_acct WHERE id = 0").Scan(&x); err != nil {
					t.Fatal(err)
				}
				if _, err := c.ExecContext(ctx, "UPDATE bank_acct SET bal = bal + 100 WHERE id = 1"); err != nil {
					t.Fatal(err)
				}
				var bal int
				var err error
				if prepared {
					err = b.QueryRowContext(ctx, "SELECT bal FROM bank_acct WHERE id = ?", 1).Scan(&bal)
				} else {
					err = b.QueryRowContext(ctx, "SELECT bal FROM bank_acct WHERE id = 1").Scan(&bal)
				}
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if bal != 1100 {
					t.Errorf("locked read in a read-only transaction answered %d, the row is 1100", bal)
				}
				if _, err := b.ExecContext(ctx, "UPDATE bank_acct SET bal = 0 WHERE id = 1"); mysqlErr(t, err).Number != 1792 {
					t.Errorf("write in the read-only transaction: %v, want MariaDB's 1792", err)
				}
				if prepared {
					return // the lock is the same for both forms; check it once
				}
				_, err = c.ExecContext(ctx, "UPDATE bank_acct SET bal = bal + 1 WHERE id = 1")
				if me := mysqlErr(t, err); me.Number != erLockWaitTimeout || !strings.HasPrefix(me.Message, "lockproxy:") {
					t.Errorf("write of row 1 while the read-only transaction holds its lock: %v, want lockproxy's 1205", err)
				}
			})
		}
	}
}

// TestCurrentReadTextAgainstMariaDB: MariaDB is the judge of where the
// locking clauses go. For each form of several query blocks, the text
// parser.CurrentReadText makes of it, run in a transaction whose snapshot
// predates another session's changes to both tables, answers what the
// original text answers in a new session (the rows as they are now),
// while the original text in that transaction answers its snapshot. A
// block left without its clause would answer from the snapshot.
func TestCurrentReadTextAgainstMariaDB(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	ctx := context.Background()
	for _, q := range []string{
		"SELECT bal FROM t WHERE id = (SELECT MIN(id) FROM u WHERE v > 150)",
		"SELECT (SELECT SUM(v) FROM u) AS s, bal FROM t WHERE id = 1",
		"SELECT d.s FROM (SELECT SUM(bal) AS s FROM t) AS d",
		"SELECT SUM(x) FROM (SELECT bal AS x FROM t UNION ALL SELECT v FROM u) AS d",
		"SELECT * FROM (SELECT t.bal, u.v FROM t JOIN u ON u.id = t.id) AS j ORDER BY bal",
		"WITH c AS (SELECT id, v FROM u) SELECT SUM(c.v), COUNT(*) FROM c JOIN t ON t.id = c.id",
		"WITH c AS (SELECT id, v FROM u), e AS (SELECT SUM(bal) AS s FROM t) SELECT (SELECT SUM(v) FROM c), s FROM e",
		"WITH RECURSIVE r (n, s) AS (SELECT 1, (SELECT SUM(bal) FROM t) UNION ALL SELECT n + 1, s FROM r WHERE n < 3) SELECT SUM(s) FROM r",
		"SELECT bal FROM t WHERE id = 1 UNION ALL SELECT v FROM u WHERE id = 2",
		"SELECT bal FROM t UNION SELECT v FROM u ORDER BY 1 DESC LIMIT 2",
		"(SELECT bal FROM t WHERE id = 2) UNION ALL (SELECT v FROM u ORDER BY v LIMIT 1) ORDER BY 1",
		"SELECT bal FROM t WHERE id = 1 UNION SELECT 7 UNION SELECT v FROM u WHERE id = 1",
		"SELECT COUNT(*) FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id AND u.v > 150)",
		"SELECT COUNT(*) FROM t WHERE id IN (SELECT id FROM u WHERE v > 150) AND bal > 15",
		"SELECT COALESCE((SELECT MAX(v) FROM u), 0) + (SELECT MAX(bal) FROM t)",
		"SELECT (SELECT COUNT(*) FROM t) + (SELECT COUNT(*) FROM u)",
		"SELECT (SELECT v FROM u WHERE id = 1) FROM t WHERE id = 1 FOR UPDATE",
		"SELECT bal FROM t WHERE id = 1 UNION SELECT v FROM u WHERE id = 1 FOR UPDATE",
	} {
		edited, ok := parser.CurrentReadText(q, 0)
		if !ok {
			t.Errorf("%s: not made current", q)
			continue
		}
		testbed.MustExec(t, direct, "DROP TABLE IF EXISTS t, u",
			"CREATE TABLE t (id INT PRIMARY KEY, bal INT)", "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
			"INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)", "INSERT INTO u VALUES (1, 100), (2, 200)")
		b := conn(t, direct)
		mustExecConn(t, b, "BEGIN", "SELECT COUNT(*) FROM t", "SELECT COUNT(*) FROM u")
		testbed.MustExec(t, direct, "UPDATE t SET bal = bal + 1000", "UPDATE u SET v = v + 1000",
			"INSERT INTO t VALUES (4, 40)", "INSERT INTO u VALUES (3, 300)")
		rows, err := b.QueryContext(ctx, q)
		_, snapshot := scanAll(t, rows, err)
		rows, err = b.QueryContext(ctx, edited)
		if err != nil {
			t.Errorf("%s\n  as %s: %v", q, edited, err)
			mustExecConn(t, b, "ROLLBACK")
			continue
		}
		_, current := scanAll(t, rows, err)
		mustExecConn(t, b, "ROLLBACK")
		rows, err = direct.QueryContext(ctx, q)
		_, now := scanAll(t, rows, err)
		if !slices.Equal(current, now) {
			t.Errorf("%s\n  as %s\n  answered %v in the transaction; the rows now give %v", q, edited, current, now)
		}
		if slices.Equal(snapshot, now) {
			t.Errorf("%s: the snapshot answers as the rows now do (%v); the check proves nothing", q, now)
		}
	}
}
