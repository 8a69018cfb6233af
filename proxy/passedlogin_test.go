package proxy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// requireEd25519 fails unless MariaDB's ed25519 plugin is loaded on the
// primary and the replica (scripts/testbed.sh loads it): an account made
// with it on a primary whose replica lacks it stops replication.
func requireEd25519(t *testing.T, p *testProxy) {
	t.Helper()
	for _, addr := range []string{p.bed.PrimaryAddr, p.bed.ReplicaAddr} {
		var status string
		err := openDB(t, p.bed.DSN(addr, "", "")).QueryRow("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'").Scan(&status)
		if err != nil || status != "ACTIVE" {
			t.Fatalf("MariaDB's ed25519 plugin is not loaded at %s (%v): start the bed again with scripts/testbed.sh, which loads it", addr, err)
		}
	}
}

// TestFromBackendPassedLogin: an account read from the primary whose
// plugins lockproxy cannot check (ed25519, alone or in a chain with
// mysql_native_password) logs in as directly: MariaDB's requests go to
// the client and its answers back, so MariaDB judges the login (a wrong
// password gets MariaDB's 1045 and counts for the throttle). The session
// keeps its one connection (multiplexed: pinned for "account"), its reads
// stay on the primary however a replica is configured, guarded writes
// take their locks, and the connection is closed, not pooled, when it
// ends. Clients: go-mysql (one plugin switch) and the mariadb CLI, which
// follows MariaDB's chain from one plugin to the next.
func TestFromBackendPassedLogin(t *testing.T) {
	base, db := lockSchema(t)
	requireEd25519(t, base)
	root := base.direct(t, "", "")
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	ed, chain := "ed_"+hex.EncodeToString(rnd[:]), "chain_"+hex.EncodeToString(rnd[:])
	createAccount(t, root, db, ed, "127.0.0.1", "ed25519 USING PASSWORD('Ed-secret-1')")
	createAccount(t, root, db, chain, "127.0.0.1", "ed25519 USING PASSWORD('Chain-ed-2') OR mysql_native_password USING PASSWORD('Chain-native-3')")
	p, _ := fromBackendProxy(t, func(c *rules.Config) {
		c.Backends.Replicas = []string{testbedFor(t).ReplicaAddr}
		c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
		c.Rules = []rules.Rule{{Name: "sku", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject}}
	})
	waitReplica(t, p)

	loginCode := func(addr, user, password string) (uint16, *client.Conn) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.ConnectWithContext(ctx, addr, user, password, db, time.Second)
		if err == nil {
			return 0, c
		}
		var me *mysql.MyError
		if !errors.As(err, &me) {
			t.Fatalf("login of %s at %s: %v", user, addr, err)
		}
		return me.Code, nil
	}
	for _, c := range []struct{ user, password string }{{ed, "Ed-secret-1"}, {chain, "Chain-ed-2"}} {
		for _, addr := range []string{base.bed.PrimaryAddr, p.addr} {
			code, conn := loginCode(addr, c.user, c.password)
			if code != 0 {
				t.Fatalf("%s at %s: login refused with %d", c.user, addr, code)
			}
			if got := answerOf(conn, "SELECT CURRENT_USER()"); got != c.user+"@127.0.0.1" {
				t.Errorf("%s at %s: CURRENT_USER() = %s", c.user, addr, got)
			}
			if addr == p.addr {
				waitPinned(t, p.reg, "account", 1)
				for i := 0; i < 3; i++ {
					if got := answerOf(conn, "SELECT @@server_id"); got != "1" {
						t.Errorf("%s: a read ran on server %s, want the primary (1): no replica connection can log in as the account", c.user, got)
					}
				}
				if got := answerOf(conn, "UPDATE sku SET stock = stock WHERE sku_id = 1"); got != "ok" {
					t.Errorf("%s: a guarded write: %s", c.user, got)
				}
				if got := answerOf(conn, "UPDATE sku SET stock = stock"); got != "error 1105" {
					t.Errorf("%s: an unkeyed guarded write: %s, want lockproxy's 1105", c.user, got)
				}
			}
			conn.Close()
			if addr == p.addr {
				waitPinned(t, p.reg, "account", 0)
				p.srv.pool.mu.Lock()
				for k, list := range p.srv.pool.idle {
					if k.relay.passed && len(list) > 0 {
						t.Errorf("%d connections of a passed login kept idle", len(list))
					}
				}
				p.srv.pool.mu.Unlock()
			}
			if c.user == chain {
				continue // MariaDB goes on to the chain's next plugin, which go-mysql cannot follow: the CLI below
			}
			if code, _ := loginCode(addr, c.user, "wrong-password"); code != 1045 {
				t.Errorf("%s at %s, wrong password: code %d, want 1045", c.user, addr, code)
			}
		}
	}

	// COM_CHANGE_USER to such an account is relayed too, from and to an
	// account lockproxy checks itself; a refusal leaves the session as
	// the user it was, as MariaDB leaves it.
	native, secret := secretUser(t, base, db)
	for _, addr := range []string{base.bed.PrimaryAddr, p.addr} {
		r := dialRaw(t, addr, native, secret, db, true)
		steps := []struct{ user, password, want string }{
			{ed, "Ed-secret-1", ed},
			{chain, "Chain-native-3", chain},
			{chain, "Chain-ed-2", chain},
			{native, secret, native},
			{ed, "wrong", native},
			{ed, "Ed-secret-1", ed},
		}
		for _, st := range steps {
			err := r.changeUser(st.user, st.password, db)
			if st.password == "wrong" {
				var me *mysql.MyError
				if !errors.As(err, &me) || me.Code != 1045 {
					t.Errorf("%s: COM_CHANGE_USER to %s with a wrong password: %v, want 1045", addr, st.user, err)
				}
			} else if err != nil {
				t.Fatalf("%s: COM_CHANGE_USER to %s: %v", addr, st.user, err)
			}
			rows, err := r.query("SELECT CURRENT_USER()")
			if err != nil || strings.Join(rows, ",") != st.want+"@127.0.0.1" {
				t.Errorf("%s: after COM_CHANGE_USER to %s: CURRENT_USER() %v %v, want %s", addr, st.user, rows, err, st.want)
			}
		}
	}

	// The chain's second plugin: the mariadb CLI answers MariaDB's
	// switch from ed25519 to mysql_native_password.
	cli := requireTool(t, "mariadb", "--version")
	for _, addr := range []string{base.bed.PrimaryAddr, p.addr} {
		host, port, _ := net.SplitHostPort(addr)
		for _, pw := range []string{"Chain-native-3", "Chain-ed-2", "wrong"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := exec.CommandContext(ctx, cli, "-h"+host, "-P"+port, "-u"+chain, "-p"+pw, "--batch", "--skip-column-names",
				"-e", "SELECT CURRENT_USER()", db).CombinedOutput()
			cancel()
			got := strings.TrimSpace(string(out))
			if pw == "wrong" {
				if err == nil || !strings.HasPrefix(got, "ERROR 1045 (28000): Access denied") {
					t.Errorf("mariadb CLI at %s, wrong password: %v: %s", addr, err, got)
				}
			} else if err != nil || got != chain+"@127.0.0.1" {
				t.Errorf("mariadb CLI at %s with %s: %v: %s", addr, pw, err, got)
			}
		}
	}
}

// TestFromBackendPassedLoginHosts: MariaDB judges a passed login against
// the row it matches for lockproxy's address; lockproxy asks which
// (CURRENT_USER()) and refuses unless that row has the credentials of
// the row the client's address picks. Attack: an account with one
// ed25519 password for 127.0.0.2, where the client connects from, and
// another for 127.0.0.1, lockproxy's address: the second password, which
// MariaDB refuses from 127.0.0.2 directly, must not log in through
// lockproxy.
func TestFromBackendPassedLoginHosts(t *testing.T) {
	base, db := lockSchema(t)
	requireEd25519(t, base)
	root := base.direct(t, "", "")
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	user := "edh_" + hex.EncodeToString(rnd[:])
	createAccount(t, root, db, user, "127.0.0.2", "ed25519 USING PASSWORD('From-client-host')")
	createAccount(t, root, db, user, "127.0.0.1", "ed25519 USING PASSWORD('From-proxy-host')")
	p, _ := fromBackendProxy(t, nil)
	from2 := func(addr, password string) (uint16, error) {
		dial := func(ctx context.Context, network, address string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			return d.DialContext(ctx, network, address)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.ConnectWithDialer(ctx, "tcp", addr, user, password, db, dial)
		if err == nil {
			cur := answerOf(c, "SELECT CURRENT_USER()")
			c.Close()
			if cur != user+"@127.0.0.2" && addr == base.bed.PrimaryAddr {
				t.Errorf("directly from 127.0.0.2: CURRENT_USER() = %s", cur)
			}
			return 0, nil
		}
		var me *mysql.MyError
		if !errors.As(err, &me) {
			return 0, err
		}
		return me.Code, nil
	}
	if code, err := from2(base.bed.PrimaryAddr, "From-client-host"); code != 0 || err != nil {
		t.Fatalf("directly from 127.0.0.2 with its own password: %d %v", code, err)
	}
	for _, addr := range []string{base.bed.PrimaryAddr, p.addr} {
		if code, err := from2(addr, "From-proxy-host"); code != 1045 || err != nil {
			t.Errorf("%s from 127.0.0.2 with the password of the 127.0.0.1 row: %d %v, want 1045", addr, code, err)
		}
	}
}

// createAccount creates user@host IDENTIFIED VIA via with every privilege
// on db, dropped when the test ends.
func createAccount(t *testing.T, root *sql.DB, db, user, host, via string) {
	t.Helper()
	account := "'" + user + "'@'" + host + "'"
	testbed.MustExec(t, root, "CREATE USER "+account+" IDENTIFIED VIA "+via, "GRANT ALL ON `"+db+"`.* TO "+account)
	t.Cleanup(func() { _, _ = root.Exec("DROP USER " + account) })
}
