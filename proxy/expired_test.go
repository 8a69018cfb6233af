package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// dialExpiring logs in to addr as user, announcing
// CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS when canHandle (as Connector/Node's
// permitConnectionWhenExpired and the mariadb CLI's
// --connect-expired-password do), which go-mysql cannot announce itself.
func dialExpiring(addr, user, password, db string, canHandle bool) (*client.Conn, error) {
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil || !canHandle {
			return nc, err
		}
		return &extCapsConn{Conn: nc, caps: mysql.CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.ConnectWithDialer(ctx, "tcp", addr, user, password, db, dial, func(c *client.Conn) error {
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		return nil
	})
}

// answerOf runs q on c: its first row's first value, or the error's code.
func answerOf(c *client.Conn, q string) string {
	r, err := c.Execute(q)
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return "error " + strconv.Itoa(int(me.Code))
		}
		return "error " + err.Error()
	}
	defer r.Close()
	if r.Resultset == nil || len(r.Values) == 0 {
		return "ok"
	}
	v, _ := r.GetString(0, 0)
	return v
}

// loginCode is the error code a login gets (0: it succeeds).
func loginCode(t *testing.T, addr, user, password, db string, canHandle bool) uint16 {
	t.Helper()
	c, err := dialExpiring(addr, user, password, db, canHandle)
	if err == nil {
		_ = c.Close()
		return 0
	}
	var me *mysql.MyError
	if !errors.As(err, &me) {
		t.Fatalf("login of %s: %v (not a MySQL error)", user, err)
	}
	return me.Code
}

// TestExpiredPassword: an account whose password expired logs in through
// lockproxy as it does directly, on every kind of login lockproxy makes
// (an account read from the primary, multiplexed and pinned; a users:
// entry): a client that can handle an expired password (CLIENT_CAN_HANDLE_
// EXPIRED_PASSWORDS) gets MariaDB's sandbox, where statements get 1820
// until SET PASSWORD, after which the session goes on as any other, a
// reset included, and the new password logs in; one that cannot gets
// 1862 under disconnect_on_expired_password, and the sandbox without it.
// The sandbox runs SET, and MariaDB runs a function a SET calls, writes
// and all: through lockproxy, which cannot read a sandboxed session's
// state, a SET calling a function that writes a guarded row is refused.
// A multiplexing session that changed its password keeps its connection
// (lockproxy_sessions_pinned{reason="account"}): one logged in again with
// what the login proved would be refused.
func TestExpiredPassword(t *testing.T) {
	base, db := lockSchema(t)
	root := base.direct(t, "", "")
	var was string
	if err := root.QueryRow("SELECT @@global.disconnect_on_expired_password").Scan(&was); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = root.Exec("SET GLOBAL disconnect_on_expired_password = " + was) })

	type path struct {
		name string
		// proxy starts the instance the account logs in through (nil:
		// directly).
		proxy func(user, password string) *testProxy
	}
	// A function that writes a guarded row: SET, all the sandbox runs,
	// may call it.
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE FUNCTION restock() RETURNS INT DETERMINISTIC MODIFIES SQL DATA "+
		"BEGIN UPDATE sku SET stock = stock + 1 WHERE sku_id = 1; RETURN 1; END")
	guard := func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn}, OnUnkeyed: rules.OnUnkeyedReject}}
	}
	paths := []path{
		{"direct", nil},
		{"from_backend multiplexed", func(string, string) *testProxy { p, _ := fromBackendProxy(t, guard); return p }},
		{"from_backend pinned", func(string, string) *testProxy {
			p, _ := fromBackendProxy(t, func(c *rules.Config) { guard(c); pinned(c) })
			return p
		}},
		{"users entry multiplexed", func(user, password string) *testProxy {
			return startProxy(t, func(c *rules.Config) { guard(c); c.Users = append(c.Users, rules.User{User: user, Password: password}) })
		}},
	}
	stock := func() string {
		var n string
		if err := root.QueryRow("SELECT stock FROM `" + db + "`.sku WHERE sku_id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, pt := range paths {
		t.Run(pt.name, func(t *testing.T) {
			user, secret := secretUser(t, base, db)
			renewed := secret + "-new"
			testbed.MustExec(t, root, "ALTER USER '"+user+"'@'127.0.0.1' PASSWORD EXPIRE")
			addr := base.bed.PrimaryAddr
			var p *testProxy
			if pt.proxy != nil {
				p = pt.proxy(user, secret)
				addr = p.addr
			}

			testbed.MustExec(t, root, "SET GLOBAL disconnect_on_expired_password = ON")
			if code := loginCode(t, addr, user, secret, db, false); code != 1862 {
				t.Errorf("login without CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: code %d, want 1862", code)
			}
			c, err := dialExpiring(addr, user, secret, db, true)
			if err != nil {
				t.Fatalf("login announcing CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: %v", err)
			}
			defer c.Close()
			if got := answerOf(c, "SELECT 1"); got != "error 1820" {
				t.Errorf("in the sandbox, SELECT 1: %s, want error 1820", got)
			}
			// The sandbox's session state cannot be read, so lockproxy
			// refuses text naming a guarded table before MariaDB would.
			want := "error 1820"
			if p != nil {
				want = "error 1105"
			}
			if got := answerOf(c, "SELECT COUNT(*) FROM sku"); got != want {
				t.Errorf("in the sandbox, SELECT COUNT(*) FROM sku: %s, want %s", got, want)
			}
			// The sandbox runs SET, and a SET may call a function that
			// writes a guarded row: not without its lock.
			before := stock()
			got := answerOf(c, "SET @r = restock()")
			switch {
			case p == nil && got != "ok":
				t.Errorf("directly, SET @r = restock() in the sandbox: %s, want it to run", got)
			case p != nil && got != "error 1105":
				t.Errorf("SET @r = restock() in the sandbox: %s, want lockproxy's 1105", got)
			case p != nil && stock() != before:
				t.Errorf("SET @r = restock() changed the guarded row's stock from %s to %s", before, stock())
			}
			if got := answerOf(c, "SET PASSWORD = PASSWORD('"+renewed+"')"); got != "ok" {
				t.Fatalf("SET PASSWORD in the sandbox: %s", got)
			}
			if p != nil && p.srv.config().Backends.Pool.Multiplex {
				waitPinned(t, p.reg, "account", 1)
			}
			for i := 0; i < 3; i++ {
				if got := answerOf(c, "SELECT CURRENT_USER()"); got != user+"@127.0.0.1" {
					t.Errorf("after SET PASSWORD, CURRENT_USER(): %s", got)
				}
				if got := answerOf(c, "SELECT COUNT(*) FROM sku"); got != "2" {
					t.Errorf("after SET PASSWORD, SELECT COUNT(*) FROM sku: %s", got)
				}
			}
			if got := answerOf(c, "SET @r = restock()"); p != nil && got != "error 1105" {
				t.Errorf("SET @r = restock() after SET PASSWORD: %s, want lockproxy's 1105", got)
			}
			if _, err := c.Execute("UPDATE sku SET stock = stock WHERE sku_id = 1"); err != nil {
				t.Errorf("a guarded write after SET PASSWORD: %v", err)
			}
			c.ResetSequence()
			if err := c.WritePacket([]byte{0, 0, 0, 0, mysql.COM_RESET_CONNECTION}); err != nil {
				t.Fatal(err)
			}
			if r, err := c.ReadPacket(); err != nil || r[0] != mysql.OK_HEADER {
				t.Fatalf("COM_RESET_CONNECTION after SET PASSWORD: % x %v", r, err)
			}
			if got := answerOf(c, "SELECT COUNT(*) FROM sku"); got != "2" {
				t.Errorf("after SET PASSWORD and a reset, SELECT COUNT(*) FROM sku: %s", got)
			}
			if pt.name != "users entry multiplexed" { // its users: entry still has the old password
				if code := loginCode(t, addr, user, renewed, db, false); code != 0 {
					t.Errorf("login with the new password: code %d", code)
				}
			}

			testbed.MustExec(t, root, "ALTER USER '"+user+"'@'127.0.0.1' PASSWORD EXPIRE", "SET GLOBAL disconnect_on_expired_password = OFF")
			pw := renewed
			if pt.name == "users entry multiplexed" {
				testbed.MustExec(t, root, "SET PASSWORD FOR '"+user+"'@'127.0.0.1' = PASSWORD('"+secret+"')",
					"ALTER USER '"+user+"'@'127.0.0.1' PASSWORD EXPIRE")
				pw = secret
			}
			s, err := dialExpiring(addr, user, pw, db, false)
			if err != nil {
				t.Fatalf("login without CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS, disconnect_on_expired_password off: %v", err)
			}
			defer s.Close()
			if got := answerOf(s, "SELECT 1"); got != "error 1820" {
				t.Errorf("in the sandbox without CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS, SELECT 1: %s, want error 1820", got)
			}
		})
	}
}
