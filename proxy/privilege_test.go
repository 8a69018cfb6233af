package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// TestShowLocksPrivacy: as with SHOW PROCESSLIST, SHOW LOCKPROXY LOCKS
// shows another user's locks only to a user with the PROCESS privilege; a
// user without it sees its own user's locks alone.
func TestShowLocksPrivacy(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	const plain, plainPw = "lp_noprocess", "lp-noprocess-pw"
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, note VARCHAR(64))",
		"INSERT INTO sku VALUES (1, 5, 'a'), (2, 5, 'b')",
		"CREATE USER IF NOT EXISTS '"+plain+"'@'%' IDENTIFIED BY '"+plainPw+"'",
		"GRANT ALL PRIVILEGES ON `"+db+"`.* TO '"+plain+"'@'%'")
	t.Cleanup(func() { _, _ = direct.Exec("DROP USER IF EXISTS '" + plain + "'@'%'") })
	p := startProxyWith(t, func(c *rules.Config) {
		c.Users = append(c.Users, rules.User{User: plain, Password: plainPw})
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(5 * time.Second)}}
	}, memlock.New(nil, nil))
	dsn := func(user, pw string) string {
		return fmt.Sprintf("%s:%s@tcp(%s)/%s", user, pw, p.addr, db)
	}
	admin := openDB(t, dsn(p.bed.User, p.bed.Password))
	other := openDB(t, dsn(plain, plainPw))

	adminConn, err := admin.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer adminConn.Close()
	mustConnExec(t, adminConn, "BEGIN", "SELECT stock FROM sku WHERE sku_id = 1 AND note <> 'admin-secret-literal' FOR UPDATE")
	otherConn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer otherConn.Close()
	mustConnExec(t, otherConn, "BEGIN", "SELECT stock FROM sku WHERE sku_id = 2 AND note <> 'own-literal' FOR UPDATE")

	statements := func(viewer string, rows [][]string, users int) map[string]string {
		out := map[string]string{}
		for _, r := range rows {
			out[r[4]] = r[7]
		}
		if len(out) != users {
			t.Fatalf("%s sees locks of %d users, want %d: %v", viewer, len(out), users, rows)
		}
		return out
	}
	seen := statements(plain, showLocks(t, other), 1)
	if s, ok := seen[p.bed.User]; ok {
		t.Errorf("a user without PROCESS sees another user's lock (statement %q)", s)
	}
	if s := seen[plain]; !strings.Contains(s, "own-literal") {
		t.Errorf("a user sees its own statement as %q", s)
	}
	seen = statements(p.bed.User, showLocks(t, admin), 2)
	if s := seen[plain]; !strings.Contains(s, "own-literal") {
		t.Errorf("a user with PROCESS sees another user's statement as %q", s)
	}
	// The observed shapes are every user's: PROCESS only.
	var me *mysql.MySQLError
	if _, err := other.Query("SHOW LOCKPROXY OBSERVED"); !errors.As(err, &me) || me.Number != 1227 || !strings.HasPrefix(me.Message, "lockproxy: ") {
		t.Errorf("SHOW LOCKPROXY OBSERVED without PROCESS: %v, want 1227", err)
	}
	// /debug/locks, behind the admin token, shows statements whole.
	for _, l := range p.srv.Locks() {
		if l.User == p.bed.User && !strings.Contains(l.Statement, "admin-secret-literal") {
			t.Errorf("/debug/locks shows %q", l.Statement)
		}
	}
}
