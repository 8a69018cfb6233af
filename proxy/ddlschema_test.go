package proxy

import (
	"context"
	"fmt"
	"testing"

	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// TestDDLThenKeyedStatement: the statement a session sends right after
// creating a guarded table through lockproxy is keyed with the new
// table's column types, as every later one is. A key bound as DOUBLE (how
// node mysql2 sends a JavaScript number) can only be keyed with the
// column's type; before the session waited for the schema its DDL makes
// lockproxy read again, it could be refused with 1105 ("a column of
// unknown type").
func TestDDLThenKeyedStatement(t *testing.T) {
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku", Table: "sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite, rules.LockLockingRead}, OnUnkeyed: rules.OnUnkeyedReject}}
	}, memlock.New(nil, nil))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		db := freshNamedDB(t, p, fmt.Sprintf("ddl_keyed_%d", i))
		conn, err := p.db(t, db, "").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustExecConn(t, conn, "CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)")
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var stock int
		err = tx.QueryRow("SELECT COUNT(*) FROM sku WHERE sku_id = ? FOR UPDATE", float64(1)).Scan(&stock)
		_ = tx.Rollback()
		conn.Close()
		if err != nil {
			t.Fatalf("round %d: a keyed locking read right after CREATE TABLE: %v", i, err)
		}
	}
}

// TestNamesRoutineOrView: with multiplexing alone reading the schema, the
// DDL after which it is read again is the DDL that may change a stored
// routine or view.
func TestNamesRoutineOrView(t *testing.T) {
	for ddl, want := range map[string]bool{
		"CREATE TABLE t (id INT)":                                         false,
		"ALTER TABLE t ADD COLUMN c INT":                                  false,
		"DROP TABLE t":                                                    false,
		"CREATE FUNCTION f() RETURNS INT RETURN 1":                        true,
		"CREATE OR REPLACE VIEW v AS SELECT 1":                            true,
		"DROP PROCEDURE IF EXISTS p":                                      true,
		"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @x = 1":    true,
		"DROP DATABASE d":                                                 true,
		"/*!50003 CREATE*/ /*!50003 FUNCTION f() RETURNS INT RETURN 1 */": true,
	} {
		if got := namesRoutineOrView(ddl); got != want {
			t.Errorf("%s: %v, want %v", ddl, got, want)
		}
	}
}
