package proxy

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// routingPart is a piece of a generated read and whether a replica may
// run it by the test's own account (not lockproxy's): built-ins that
// neither write nor depend on the server are pure; stored functions of
// every characteristic, sequences, user locks and variables, the
// session's history, global and replication variables, and the built-in
// names that the database resolves to a stored function are not.
type routingPart struct {
	sql  string
	pure bool
}

// TestReplicaRoutingOracle sends generated plain reads through lockproxy
// with a replica, as text and as prepared statements: every read the
// replica ran must be one the test calls pure, pure reads must reach the
// replica at all, the replica's read-only session never refuses a write
// (lockproxy routed nothing that writes), and the replica never writes.
func TestReplicaRoutingOracle(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	// Made through lockproxy, so its schema read knows the views.
	testbed.MustExec(t, h,
		"CREATE TABLE log (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(20))",
		"CREATE TABLE plain (id INT PRIMARY KEY, v VARCHAR(10))",
		"INSERT INTO plain VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"CREATE SEQUENCE sq",
		"CREATE FUNCTION f_nosql() RETURNS INT DETERMINISTIC NO SQL RETURN 1",
		"CREATE FUNCTION f_nd() RETURNS INT NOT DETERMINISTIC NO SQL RETURN 2",
		"CREATE FUNCTION f_contains() RETURNS INT DETERMINISTIC CONTAINS SQL BEGIN SET @side = 1; RETURN 3; END",
		"CREATE FUNCTION f_reads() RETURNS INT NOT DETERMINISTIC READS SQL DATA RETURN (SELECT COUNT(*) FROM plain)",
		"CREATE FUNCTION f_mod() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('f_mod'); RETURN 4; END",
		"CREATE FUNCTION f_invoker() RETURNS INT DETERMINISTIC MODIFIES SQL DATA SQL SECURITY INVOKER BEGIN INSERT INTO log (what) VALUES ('f_invoker'); RETURN 5; END",
		"CREATE FUNCTION f_lock() RETURNS INT NO SQL RETURN GET_LOCK('lockproxy_oracle_f', 0)",
		"CREATE FUNCTION f_seq() RETURNS BIGINT DETERMINISTIC MODIFIES SQL DATA RETURN NEXTVAL(sq)",
		"CREATE FUNCTION `now`() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('now'); RETURN 6; END",
		"CREATE FUNCTION `count`(x INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO log (what) VALUES ('count'); RETURN 7; END",
		"CREATE VIEW v_pure AS SELECT id, v FROM plain",
		"CREATE VIEW v_mod AS SELECT id, v, f_mod() AS x FROM plain",
		"CREATE VIEW v_nested AS SELECT id, v, x FROM v_mod")
	waitReplica(t, p)

	exprs := []routingPart{
		{"CONCAT('a', id)", true}, {"ABS(-3)", true}, {"NOW()", true}, {"DATE_ADD(NOW(), INTERVAL 1 DAY)", true},
		{"COALESCE(NULL, id)", true}, {"UPPER(v)", true}, {"LENGTH('abc')", true}, {"MD5('x')", true},
		{"JSON_OBJECT('a', id)", true}, {"ROUND(1.5)", true}, {"IF(id > 1, 2, 3)", true}, {"@@time_zone", true},
		{"CAST(id AS CHAR)", true}, {"SUBSTRING(v, 1)", true}, {"UNIX_TIMESTAMP()", true}, {"DATABASE()", true},
		{"(SELECT MAX(id) FROM plain)", true}, {"COUNT(*) OVER ()", true}, {"SHA2('x', 256)", true},
		{"f_nosql()", false}, {"f_nd()", false}, {"f_contains()", false}, {"f_reads()", false},
		{"f_mod()", false}, {"f_invoker()", false}, {"f_lock()", false}, {"f_seq()", false},
		{"`" + db + "`.f_mod()", false}, {"NOW ()", false}, {"`now`()", false}, {"NOW/**/()", false},
		{"`count`(1)", false}, {"NEXTVAL(sq)", false}, {"NEXT VALUE FOR sq", false}, {"LASTVAL(sq)", false},
		{"SETVAL(sq, 1000)", false}, {"GET_LOCK('lockproxy_oracle', 0)", false},
		{"RELEASE_LOCK('lockproxy_oracle')", false}, {"IS_USED_LOCK('lockproxy_oracle')", false},
		{"LAST_INSERT_ID()", false}, {"ROW_COUNT()", false}, {"@x := 1", false}, {"@x", false},
		{"@@GLOBAL.read_only", false}, {"@@read_only", false}, {"@@tx_read_only", false},
		{"@@gtid_current_pos", false}, {"@@last_insert_id", false}, {"(SELECT f_mod())", false},
		{"(SELECT MAX(x) FROM v_mod)", false}, {"LOAD_FILE('/etc/hostname')", false},
	}
	sources := []routingPart{
		{"plain", true}, {"v_pure", true}, {"(SELECT id, v FROM plain) AS d", true},
		{"v_mod", false}, {"v_nested", false},
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	before := counterValue(t, p, "lockproxy_replica_write_refused_total")
	const n = 400
	var pureOnReplica, pure int
	for i := range n {
		src := sources[rng.IntN(len(sources))]
		parts := []string{"@@server_id"}
		ok := src.pure
		for range 1 + rng.IntN(3) {
			e := exprs[rng.IntN(len(exprs))]
			for rng.IntN(4) > 0 && !e.pure { // mostly pure parts, so that whole reads are too
				e = exprs[rng.IntN(len(exprs))]
			}
			parts, ok = append(parts, e.sql), ok && e.pure
		}
		q := fmt.Sprintf("SELECT %s FROM %s", strings.Join(parts, ", "), src.sql)
		var args []any
		if i%2 == 1 {
			q += " WHERE id >= ?" // database/sql prepares it
			args = append(args, 1)
		}
		q += " LIMIT 1"
		sid, err := firstColumn(h, q, args...)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1442 {
			// f_seq() with another use of sq in one statement: MariaDB
			// refuses it, wherever it runs.
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if ok {
			pure++
		}
		if sid == fmt.Sprint(replicaID) {
			if !ok {
				t.Errorf("ran on the replica: %s", q)
			}
			pureOnReplica++
		}
	}
	t.Logf("%d reads: %d pure by the test's account, %d of them served by the replica", n, pure, pureOnReplica)
	if pure > 0 && pureOnReplica == 0 {
		t.Errorf("none of %d pure reads reached the replica", pure)
	}
	if got := counterValue(t, p, "lockproxy_replica_write_refused_total") - before; got != 0 {
		t.Errorf("the replica's read-only session refused %v writes lockproxy routed to it", got)
	}
	replicaWrites(t, p, db)
}

// firstColumn runs q and returns the first column of its last row.
func firstColumn(h *sql.DB, q string, args ...any) (string, error) {
	rows, err := h.Query(q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for j := range vals {
		ptrs[j] = &vals[j]
	}
	first := ""
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		first = string(vals[0])
	}
	return first, rows.Err()
}
