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
// backends.schema_refresh an hour away: a view made through A is seen by
// B (a keyless write through it is refused), and a key column's collation
// changed through A makes B key 'ABC' as the 'abc' a session of A holds.
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
		took, tries := awaitRefusal(t, viaB, "UPDATE v SET n = n + 1", 1105)
		t.Logf("instance B refused the keyless write through the view %v after A created it (attempt %d)", took, tries)
	})
	t.Run("key collation", func(t *testing.T) {
		if _, err := viaA.Exec("ALTER TABLE item MODIFY code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"); err != nil {
			t.Fatal(err)
		}
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
		// write B lets through unlocked (keyed under the old collation)
		// waits there and gets InnoDB's 1205.
		took, tries := awaitRefusal(t, viaB, "UPDATE item SET n = n + 1 WHERE code = 'ABC'", 1205)
		t.Logf("instance B waited for 'ABC' as for the 'abc' A holds %v after the ALTER (attempt %d)", took, tries)
	})
	if heard := schemaWords(t, b, "heard"); heard < 2 {
		t.Errorf("instance B heard %v DDL announcements, want 2", heard)
	}
	if sent := schemaWords(t, a, "sent"); sent != 2 {
		t.Errorf("instance A sent %v DDL announcements, want 2", sent)
	}
	if heard := schemaWords(t, a, "heard"); heard != 0 {
		t.Errorf("instance A heard %v announcements; its own must not count", heard)
	}
}

// awaitRefusal runs q through db until lockproxy refuses it with code,
// and returns how long that took and in how many attempts. Other answers
// (success, InnoDB's own lock wait timeout) mean the instance does not
// know the DDL yet; after 20s the test fails.
func awaitRefusal(t *testing.T, db *sql.DB, q string, code uint16) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	for tries := 1; ; tries++ {
		_, err := db.Exec(q)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == code && strings.HasPrefix(me.Message, "lockproxy:") {
			return time.Since(start), tries
		}
		if err != nil && !(errors.As(err, &me) && me.Number == 1205) {
			t.Fatalf("%s: %v", q, err)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%s: still not refused by lockproxy with %d after 20s (last answer %v); schema_refresh is 1h", q, code, err)
		}
		time.Sleep(10 * time.Millisecond)
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
