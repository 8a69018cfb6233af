package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
)

// TestUpsertThroughAnotherUniqueKey: on a duplicate in another unique key,
// REPLACE deletes, and ON DUPLICATE KEY UPDATE updates, a row whose key the
// statement does not name: refused, while on a table whose only unique key
// is the rule's the same statements are keyed.
func TestUpsertThroughAnotherUniqueKey(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, code VARCHAR(8) NOT NULL UNIQUE, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (7, 'x', 10)")
	p := guardedProxy(t, db, nil)
	c := p.db(t, db, "")
	for _, q := range []string{
		"REPLACE INTO sku (sku_id, code, stock) VALUES (5, 'x', 1)",
		"INSERT INTO sku (sku_id, code, stock) VALUES (5, 'x', 1) ON DUPLICATE KEY UPDATE stock = 0",
	} {
		_, err := c.Exec(q)
		wantRefused(t, q, err)
	}
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 7").Scan(&stock); err != nil || stock != 10 {
		t.Fatalf("row 7: stock %d, %v; want 10, untouched", stock, err)
	}

	testbed.MustExec(t, direct, "CREATE TABLE sku2 (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)")
	q := guardedProxy(t, db, func(r *rules.Rule) { r.Table = db + ".sku2" })
	if _, err := q.db(t, db, "").Exec("REPLACE INTO sku2 (sku_id, stock) VALUES (5, 1)"); err != nil {
		t.Fatalf("REPLACE keyed on the only unique key: %v", err)
	}
}

// TestForeignKeyCascadeIntoGuardedTable: a foreign key whose ON DELETE or
// ON UPDATE writes a guarded child table makes writes to its parent writes
// lockproxy cannot key: refused, as a trigger's would be. A RESTRICT key
// writes nothing and changes nothing.
func TestForeignKeyCascadeIntoGuardedTable(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE cat (id INT PRIMARY KEY)",
		"CREATE TABLE shelf (id INT PRIMARY KEY)",
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, cat_id INT, shelf_id INT, stock INT NOT NULL,"+
			" FOREIGN KEY (cat_id) REFERENCES cat (id) ON DELETE CASCADE ON UPDATE SET NULL,"+
			" FOREIGN KEY (shelf_id) REFERENCES shelf (id))",
		"INSERT INTO cat VALUES (1), (2)", "INSERT INTO shelf VALUES (1), (2)",
		"INSERT INTO sku VALUES (10, 1, 1, 5)")
	p := guardedProxy(t, db, nil)
	c := p.db(t, db, "")
	for _, q := range []string{
		"DELETE FROM cat WHERE id = 1",
		"UPDATE cat SET id = 3 WHERE id = 1",
		"REPLACE INTO cat VALUES (1)",
	} {
		_, err := c.Exec(q)
		wantRefused(t, q, err)
	}
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE cat_id = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("sku rows of cat 1: %d, %v; want 1, untouched", n, err)
	}
	if _, err := c.Exec("DELETE FROM shelf WHERE id = 2"); err != nil {
		t.Fatalf("a write to the parent of a RESTRICT key: %v", err)
	}
	if _, err := c.Exec("DELETE FROM cat WHERE id = 2"); err == nil {
		t.Fatal("a write to the parent of a CASCADE key ran")
	}
}

// TestSchemaRefreshSeesNewViews: a view made directly on the primary, not
// through lockproxy, is seen within backends.schema_refresh: writes
// through it then take the base row's lock.
func TestSchemaRefreshSeesNewViews(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Backends.SchemaRefresh = rules.Duration(200 * time.Millisecond)
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(100 * time.Millisecond)}}
	}, memlock.New(nil, nil))
	holder, err := p.db(t, db, "").Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	var stock int
	if err := holder.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, direct, "CREATE VIEW v AS SELECT sku_id AS k, stock AS s FROM sku")
	// The holder's current read share-locks the row in InnoDB too: a
	// write lockproxy let through unlocked waits there, briefly.
	c := p.db(t, db, "innodb_lock_wait_timeout=1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Exec("UPDATE v SET s = s WHERE k = 1")
		if err != nil {
			if me := mysqlErr(t, err); me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
				if time.Now().Before(deadline) && me.Number == 1205 {
					continue // InnoDB's wait: the view is not known yet
				}
				t.Fatalf("want lockproxy's 1205 once the view is known, got %v", me)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("writes through the new view still take no lock after 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnreadSchemaKeysNothing starts lockproxy with a primary that will
// not describe the guarded table (the first configured user, through
// which the schema is read, cannot log in): the key column's type is
// unknown, so a keyed UPDATE is refused as unkeyed (on_unkeyed: reject)
// rather than keyed by its literal form, and no row changes.
func TestUnreadSchemaKeysNothing(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (0, 10), (1001, 10)")
	p := guardedProxyWith(t, db, nil, func(c *rules.Config) {
		c.Users = append([]rules.User{{User: "lockproxy_no_such_user", Password: "not-a-password"}}, c.Users...)
	})
	for _, where := range []string{"sku_id = 1001", "sku_id = 'abc'"} {
		_, err := p.db(t, db, "").Exec("UPDATE sku SET stock = 0 WHERE " + where)
		if err == nil {
			t.Fatalf("%s ran with the schema unread", where)
		}
		if me := mysqlErr(t, err); me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "could not be read from the primary") {
			t.Fatalf("%s: want lockproxy's 1105 saying the schema is unread, got %v", where, me)
		}
	}
	var changed int
	if err := direct.QueryRow("SELECT COUNT(*) FROM sku WHERE stock = 0").Scan(&changed); err != nil || changed != 0 {
		t.Fatalf("rows changed: %d (%v)", changed, err)
	}
}

// TestSchemaRefreshFailureKeepsSchema: once the schema was read, a refresh
// the primary does not answer (the schema user's password changed) keeps
// the schema read before, as between two refreshes: keyed writes go on
// being keyed rather than refused as unkeyed.
func TestSchemaRefreshFailureKeepsSchema(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	const user, pw = "lp_schema_reader", "lp-schema-reader-pw"
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct,
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1001, 10)",
		"CREATE USER IF NOT EXISTS '"+user+"'@'%' IDENTIFIED BY '"+pw+"'",
		"GRANT ALL PRIVILEGES ON `"+db+"`.* TO '"+user+"'@'%'")
	t.Cleanup(func() { _, _ = direct.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	p := guardedProxyWith(t, db, nil, func(c *rules.Config) {
		c.Users = append([]rules.User{{User: user, Password: pw}}, c.Users...)
		c.Backends.SchemaRefresh = rules.Duration(100 * time.Millisecond)
	})
	c := p.db(t, db, "")
	if _, err := c.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1001"); err != nil {
		t.Fatalf("keyed UPDATE with the schema read: %v", err)
	}
	testbed.MustExec(t, direct, "ALTER USER '"+user+"'@'%' IDENTIFIED BY 'changed-"+pw+"'")
	time.Sleep(time.Second) // several refreshes, each refused by the primary
	if _, err := c.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1001"); err != nil {
		t.Fatalf("keyed UPDATE after failed refreshes: %v", err)
	}
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1001").Scan(&stock); err != nil || stock != 8 {
		t.Fatalf("stock %d (%v), want 8", stock, err)
	}
}

// TestSchemaChangeAnnounced: a DDL run through one instance is announced
// through the lock service (Redis) it shares with another, which re-reads
// the schema at once instead of at its next schema_refresh (an hour
// here): a write through a view just created on instance A meets the
// rule on instance B and waits for the row's lock a session holds.
func TestSchemaChangeAnnounced(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10)")
	rdb, prefix := testRedis(t)
	instance := func() *testProxy {
		return startProxyWith(t, func(c *rules.Config) {
			c.Backends.SchemaRefresh = rules.Duration(time.Hour)
			c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
				Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
				OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(100 * time.Millisecond)}}
		}, redislock.New(rdb, &redislock.Options{TTL: 3 * time.Second, Prefix: prefix}))
	}
	a, b := instance(), instance()
	holder, err := b.db(t, db, "").Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	var stock int
	if err := holder.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, a.db(t, db, ""), "CREATE VIEW v AS SELECT sku_id AS k, stock AS s FROM sku")
	// The holder's current read share-locks the row in InnoDB too: a
	// write B lets through unlocked waits there, briefly.
	c := b.db(t, db, "innodb_lock_wait_timeout=1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := c.Exec("UPDATE v SET s = s WHERE k = 1")
		if err != nil {
			me := mysqlErr(t, err)
			if me.Number == 1205 && !strings.HasPrefix(me.Message, "lockproxy:") && time.Now().Before(deadline) {
				continue // InnoDB's wait: B does not know the view yet
			}
			if me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") {
				t.Fatalf("want lockproxy's 1205 once instance B knows the view, got %v", me)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("instance B: writes through the view A created still take no lock after 10s")
		}
	}
}
