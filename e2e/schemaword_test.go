package e2e

import (
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// schemaWordRule guards e2e_schemaword.item by its text key, whose
// collation the test changes.
const schemaWordRule = `rules:
  - name: item
    table: e2e_schemaword.item
    key: [code]
    on_unkeyed: reject
    wait_timeout: 300ms
`

// TestSchemaChangeReachesOtherInstance: DDL run through one lockproxy
// instance reaches another sharing its lock backend through the lock
// service, on every backend that carries the word (Redis Pub/Sub, an
// etcd key, a ZooKeeper znode, the MySQL lock table's version row), with
// backends.schema_refresh an hour away: once B has heard of it, B's next
// statement honours it. A view made through A is seen by B (a keyless
// write through it is refused), and a key column's collation changed
// through A makes B key 'ABC' as the 'abc' a session of A holds.
func TestSchemaChangeReachesOtherInstance(t *testing.T) {
	bed := testbed.Get(t)
	for _, backend := range []struct {
		name  string
		locks func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string { return redisLocks(bed, "10s", "10s") }},
		{"mysql", func(t *testing.T) string {
			return "locks:\n  backend: mysql\n  mysql: {table: e2e_schemaword_locks.locks}\n" + lockTimes
		}},
		{"etcd", func(t *testing.T) string { return etcdLocks(startEtcd(t)) }},
		{"zookeeper", func(t *testing.T) string { return zkLocks(startZooKeeper(t)) }},
	} {
		t.Run(backend.name, func(t *testing.T) { schemaWord(t, bed, backend.locks(t)) })
	}
}

func schemaWord(t *testing.T, bed *testbed.Bed, locks string) {
	const dbName = "e2e_schemaword"
	direct := freshDB(t, bed, dbName)
	for _, q := range []string{
		"CREATE TABLE item (code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO item VALUES ('abc', 0)",
	} {
		if _, err := direct.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// The line joins the backends section config renders before locks.
	locks = "  schema_refresh: 1h\n" + locks
	a := start(t, bed, locks, schemaWordRule)
	b := start(t, bed, locks, schemaWordRule)
	viaA := open(t, bed, a.addr, dbName, "", 4)
	viaB := open(t, bed, b.addr, dbName, "innodb_lock_wait_timeout=1", 4)

	t.Run("view", func(t *testing.T) {
		if _, err := viaA.Exec("CREATE VIEW v AS SELECT n FROM item"); err != nil {
			t.Fatal(err)
		}
		t.Logf("instance B heard of the view %v after A answered", awaitHeard(t, b, 1))
		mustRefuse(t, viaB, "UPDATE v SET n = n + 1", 1105)
	})
	t.Run("key collation", func(t *testing.T) {
		if _, err := viaA.Exec("ALTER TABLE item MODIFY code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"); err != nil {
			t.Fatal(err)
		}
		t.Logf("instance B heard of the ALTER %v after A answered", awaitHeard(t, b, 2))
		holder, err := viaA.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		var n int
		if err := holder.QueryRow("SELECT n FROM item WHERE code = 'abc'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The holder's current read share-locks the row in InnoDB too: a
		// write B let through unlocked (keyed under the old collation)
		// would wait there and get InnoDB's own 1205.
		mustRefuse(t, viaB, "UPDATE item SET n = n + 1 WHERE code = 'ABC'", 1205)
	})
	if sent := schemaWords(t, a, "sent"); sent != 2 {
		t.Errorf("instance A sent %v DDL announcements, want 2", sent)
	}
	if heard := schemaWords(t, a, "heard"); heard != 0 {
		t.Errorf("instance A heard %v announcements; its own must not count", heard)
	}
}

// awaitHeard waits until in has heard n DDL announcements (from then on
// its plans wait for the schema read the last one started) and returns
// how long that took. A minute is the failure bound; schema_refresh is an
// hour away.
func awaitHeard(t *testing.T, in *instance, n float64) time.Duration {
	t.Helper()
	start := time.Now()
	for schemaWords(t, in, "heard") < n {
		if time.Since(start) > time.Minute {
			t.Fatalf("instance %s heard %v DDL announcements after a minute, want %v", in.addr, schemaWords(t, in, "heard"), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// mustRefuse runs q through db once and wants lockproxy's error code.
func mustRefuse(t *testing.T, db *sql.DB, q string, code uint16) {
	t.Helper()
	_, err := db.Exec(q)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != code || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("%s: got %v, want lockproxy's %d: the instance planned it with the schema from before the DDL", q, err, code)
	}
}

// schemaWords reads lockproxy_schema_announcements_total{event} of in.
func schemaWords(t *testing.T, in *instance, event string) float64 {
	t.Helper()
	prefix := `lockproxy_schema_announcements_total{event="` + event + `"} `
	for _, line := range strings.Split(string(get(t, "http://"+in.admin+"/metrics")), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}
