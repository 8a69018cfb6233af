package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// TestReplicaPinnedByAnyTemporaryTable: a temporary table made by a
// statement the parser cannot read, by a stored function or by a trigger
// shadows a base table on the primary only; the session's next reads go
// there and see what MariaDB shows directly.
func TestReplicaPinnedByAnyTemporaryTable(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	// Made through lockproxy, which reads the schema again after DDL
	// before the session's next statement.
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	testbed.MustExec(t, h,
		"CREATE TABLE plain (id INT PRIMARY KEY)", "INSERT INTO plain VALUES (1), (2), (3)",
		"CREATE TABLE fired (id INT)",
		"CREATE TRIGGER mk_on_insert AFTER INSERT ON fired FOR EACH ROW CREATE TEMPORARY TABLE plain (id INT)",
		"CREATE FUNCTION mk() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN CREATE TEMPORARY TABLE plain (id INT); RETURN 1; END",
		"DO 1")
	waitReplica(t, p)
	ctx := context.Background()
	for name, create := range map[string]string{
		"point":             "CREATE TEMPORARY TABLE plain (id INT, g POINT)",
		"uuid":              "CREATE TEMPORARY TABLE plain (id INT, u UUID)",
		"inet6":             "CREATE TEMPORARY TABLE plain (id INT, a INET6)",
		"or replace":        "CREATE OR REPLACE TEMPORARY TABLE plain (id INT)",
		"sequence":          "CREATE TEMPORARY SEQUENCE plain",
		"versioned comment": "CREATE /*!TEMPORARY*/ TABLE plain (id INT)",
		"stored function":   "SELECT mk()",
		"trigger":           "INSERT INTO fired VALUES (1)",
	} {
		t.Run(name, func(t *testing.T) {
			d := p.direct(t, db, "")
			want := 0
			dc, err := d.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer dc.Close()
			if _, err := dc.ExecContext(ctx, create); err != nil {
				t.Fatalf("directly: %s: %v", create, err)
			}
			if err := dc.QueryRowContext(ctx, "SELECT COUNT(*) FROM plain").Scan(&want); err != nil {
				t.Fatal(err)
			}
			c, err := p.db(t, db, "").Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var sid int
			if err := c.QueryRowContext(ctx, "SELECT @@server_id FROM plain LIMIT 1").Scan(&sid); err != nil || sid != replicaID {
				t.Fatalf("before: served by %d (%v), want the replica", sid, err)
			}
			if _, err := c.ExecContext(ctx, create); err != nil {
				t.Fatalf("through lockproxy: %s: %v", create, err)
			}
			var n int
			if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM plain").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("SELECT COUNT(*) FROM plain after %s: %d through lockproxy, %d directly", create, n, want)
			}
		})
	}
}

// TestReplicaSessionIsolation: the session's isolation level applies to
// its replica reads as to its primary ones; SET TRANSACTION without a
// scope sends the next transaction to the primary, where it was set. The
// same with multiplexing, where the session's SETs are replayed on the
// connections it borrows.
func TestReplicaSessionIsolation(t *testing.T) {
	t.Run("pinned", func(t *testing.T) { replicaSessionIsolation(t, routedProxy(t, pinned)) })
	t.Run("multiplexed", func(t *testing.T) {
		replicaSessionIsolation(t, startProxy(t, func(c *rules.Config) {
			c.Backends.Replicas = []string{testbedFor(t).ReplicaAddr}
			c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
			multiplexed(4)(c)
		}))
	})
}

func replicaSessionIsolation(t *testing.T, p *testProxy) {
	db := freshDB(t, p)
	waitReplica(t, p)
	ctx := context.Background()
	c, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const q = "SELECT @@server_id, @@time_zone, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES WHERE VARIABLE_NAME = 'TX_ISOLATION'"
	read := func(want string, wantServer int) {
		t.Helper()
		if wantServer == replicaID {
			waitReplica(t, p)
		}
		var sid int
		var tz, iso string
		if err := c.QueryRowContext(ctx, q).Scan(&sid, &tz, &iso); err != nil {
			t.Fatal(err)
		}
		if iso != want || sid != wantServer {
			t.Errorf("server %d read under %s, want server %d under %s", sid, iso, wantServer, want)
		}
	}
	read("REPEATABLE-READ", replicaID)
	mustExecConn(t, c, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	read("READ-COMMITTED", replicaID)
	mustExecConn(t, c, "SET SESSION tx_isolation = 'SERIALIZABLE'")
	read("SERIALIZABLE", replicaID)
	mustExecConn(t, c, "SET SESSION TRANSACTION READ ONLY")
	read("SERIALIZABLE", replicaID)
	mustExecConn(t, c, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
	read("SERIALIZABLE", primaryID)
	read("SERIALIZABLE", replicaID)
	var ro int
	if err := c.QueryRowContext(ctx, "SELECT @@tx_read_only").Scan(&ro); err != nil || ro != 1 {
		t.Errorf("@@tx_read_only %d (%v), want 1 after SET SESSION TRANSACTION READ ONLY", ro, err)
	}
}

// TestReplicaAfterSetOption: once a client turned multi-statements off
// with COM_SET_OPTION, a multi-statement read is refused as MariaDB
// refuses it directly, not run by a replica connection that still
// accepts it.
func TestReplicaAfterSetOption(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE plain (id INT PRIMARY KEY)", "INSERT INTO plain VALUES (1)")
	waitReplica(t, p)
	answer := func(addr string) string {
		c, err := client.Connect(addr, p.bed.User, p.bed.Password, db, func(c *client.Conn) error {
			return c.SetCapability(mysql.CLIENT_MULTI_STATEMENTS)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), mysql.COM_SET_OPTION, 1, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		_, err = c.Execute("SELECT id FROM plain; SELECT 2")
		var me *mysql.MyError
		if errors.As(err, &me) {
			return fmt.Sprint(me.Code)
		}
		return fmt.Sprint(err)
	}
	if want, got := answer(p.bed.PrimaryAddr), answer(p.addr); got != want {
		t.Errorf("a multi-statement read after COM_SET_OPTION(off): %s through lockproxy, %s directly", got, want)
	}
}
