package proxy

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	gosql "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fromBackendProxy runs a proxy that serves the primary's accounts
// (users.from_backend) and logs into logs; failed logins may read the
// accounts again at once.
func fromBackendProxy(t *testing.T, edit func(*rules.Config)) (*testProxy, *observer.ObservedLogs) {
	t.Helper()
	return fromBackendProxyAnnouncing(t, "", edit)
}

// fromBackendProxyAnnouncing is fromBackendProxy announcing plugin.
func fromBackendProxyAnnouncing(t *testing.T, plugin string, edit func(*rules.Config)) (*testProxy, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	p := observedProxy(t, observed{log: zap.New(core), authPlugin: plugin, edit: func(c *rules.Config) {
		c.UsersFromBackend = true
		if edit != nil {
			edit(c)
		}
	}})
	p.srv.accounts.mu.Lock()
	p.srv.accounts.gap = 0
	p.srv.accounts.mu.Unlock()
	return p, logs
}

// userDSN is a DSN for user and password at addr.
func userDSN(user, password, addr, db string) string {
	c := gosql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", addr, db
	return c.FormatDSN()
}

// loginErr is the MySQL error a login gets (nil when it succeeds).
func loginErr(t *testing.T, dsn string) *gosql.MySQLError {
	t.Helper()
	db, err := openDBErr(dsn)
	if err == nil {
		_ = db.Close()
		return nil
	}
	var me *gosql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("login: %v (not a MySQL error)", err)
	}
	return me
}

// accessDenied is the number of failed logins the primary has counted.
func accessDenied(t *testing.T, root *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Access_denied_errors'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFromBackendAccounts: an account made in MariaDB, in no users:
// entry, logs in through lockproxy with its own password, and its
// statements run on the primary as that account; a wrong password is
// refused by lockproxy without a login on the primary; a changed password
// is honoured once a failed login has read the accounts again; a dropped
// account stops working at the next reload; host rows lockproxy cannot
// order fail closed; other plugins get 1251; no password, SHA1(password)
// or stored hash reaches the log.
func TestFromBackendAccounts(t *testing.T) {
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	root := base.direct(t, "", "")
	p, logs := fromBackendProxy(t, nil)
	stage1 := sha1.Sum([]byte(secret))
	stored := sha1.Sum(stage1[:])
	t.Cleanup(func() {
		checkNoSecret(t, logs, secret, user)
		checkNoBytes(t, logs, map[string]string{
			"SHA1(password)":     string(stage1[:]),
			"SHA1(password) hex": hex.EncodeToString(stage1[:]),
			"stored hash":        strings.ToUpper(hex.EncodeToString(stored[:])),
		})
	})

	t.Run("logs in as the account", func(t *testing.T) {
		app := openDB(t, userDSN(user, secret, p.addr, db))
		var cur, sess string
		if err := app.QueryRow("SELECT CURRENT_USER(), USER()").Scan(&cur, &sess); err != nil {
			t.Fatal(err)
		}
		if cur != user+"@127.0.0.1" || !strings.HasPrefix(sess, user+"@") {
			t.Errorf("CURRENT_USER() = %q, USER() = %q; want the account %s@127.0.0.1", cur, sess, user)
		}
		testbed.MustExec(t, app, "UPDATE sku SET stock = 5 WHERE sku_id = 1")
		// The account may use db only: lockproxy's own account may read
		// mysql.global_priv, this one may not.
		var n int
		err := app.QueryRow("SELECT COUNT(*) FROM mysql.global_priv").Scan(&n)
		var me *gosql.MySQLError
		if !errors.As(err, &me) || me.Number != 1142 {
			t.Errorf("the account read mysql.global_priv (err %v): statements do not run as the account", err)
		}
	})

	t.Run("wrong password is refused by lockproxy", func(t *testing.T) {
		// The primary counts every failed login; other tests may add to
		// the count meanwhile, so a window in which it stays put is
		// looked for. Were the login tried on the primary, no window
		// could be clean.
		if me := loginErr(t, userDSN(user, secret+"-wrong", p.bed.PrimaryAddr, db)); me == nil || me.Number != 1045 {
			t.Fatalf("direct wrong password: %v", me)
		}
		clean := false
		for range 3 {
			before := accessDenied(t, root)
			me := loginErr(t, userDSN(user, secret+"-wrong", p.addr, db))
			if me == nil || me.Number != 1045 || !strings.HasPrefix(me.Message, "lockproxy: Access denied for user '"+user+"'") {
				t.Fatalf("wrong password through lockproxy: %v, want lockproxy's 1045", me)
			}
			if accessDenied(t, root) == before {
				clean = true
				break
			}
		}
		if !clean {
			t.Error("the primary counted a failed login for every wrong password sent through lockproxy")
		}
	})

	t.Run("changed password is honoured after a failed login", func(t *testing.T) {
		testbed.MustExec(t, root, "ALTER USER '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"-new'")
		if me := loginErr(t, userDSN(user, secret+"-new", p.addr, db)); me != nil {
			t.Fatalf("the new password: %v", me)
		}
		me := loginErr(t, userDSN(user, secret, p.addr, db))
		if me == nil || me.Number != 1045 {
			t.Fatalf("the old password: %v, want 1045", me)
		}
		testbed.MustExec(t, root, "ALTER USER '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"'")
		if me := loginErr(t, userDSN(user, secret, p.addr, db)); me != nil {
			t.Fatalf("the password set back: %v", me)
		}
	})

	t.Run("dropped account stops working", func(t *testing.T) {
		gone := "fbgone_" + user[4:]
		testbed.MustExec(t, root, "CREATE USER '"+gone+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"'")
		t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS '" + gone + "'@'127.0.0.1'") })
		if me := loginErr(t, userDSN(gone, secret, p.addr, "")); me != nil {
			t.Fatalf("new account: %v", me)
		}
		testbed.MustExec(t, root, "DROP USER '"+gone+"'@'127.0.0.1'")
		// Until lockproxy reads the accounts again, MariaDB itself refuses
		// the login lockproxy relays: pooled connections log in again.
		if me := loginErr(t, userDSN(gone, secret, p.addr, "")); !deniedByMariaDB(me) {
			t.Fatalf("dropped account before the reload: %v, want MariaDB's own access denied", me)
		}
		if err := p.srv.Reload(p.srv.config()); err != nil {
			t.Fatal(err)
		}
		if me := loginErr(t, userDSN(gone, secret, p.addr, "")); me == nil || me.Number != 1045 || !strings.HasPrefix(me.Message, "lockproxy:") {
			t.Fatalf("dropped account after the reload: %v, want lockproxy's 1045", me)
		}
	})

	t.Run("hosts lockproxy cannot order fail closed", func(t *testing.T) {
		name := "fbhost_" + user[4:]
		testbed.MustExec(t, root, "CREATE USER '"+name+"'@'127.0.0.%' IDENTIFIED BY '"+secret+"'",
			"CREATE USER '"+name+"'@'127.%' IDENTIFIED BY '"+secret+"'")
		t.Cleanup(func() {
			_, _ = root.Exec("DROP USER IF EXISTS '" + name + "'@'127.0.0.%', '" + name + "'@'127.%'")
		})
		// Two patterns match the client; with one password it does not
		// matter which MariaDB takes.
		if me := loginErr(t, userDSN(name, secret, p.addr, "")); me != nil {
			t.Fatalf("two rows with one password: %v", me)
		}
		testbed.MustExec(t, root, "ALTER USER '"+name+"'@'127.%' IDENTIFIED BY '"+secret+"-other'")
		if err := p.srv.Reload(p.srv.config()); err != nil {
			t.Fatal(err)
		}
		me := loginErr(t, userDSN(name, secret, p.addr, ""))
		if me == nil || me.Number != 1045 || !strings.Contains(me.Message, "lockproxy cannot tell which MariaDB would use") {
			t.Fatalf("two rows with two passwords: %v, want lockproxy's 1045 saying why", me)
		}
	})

	t.Run("other plugins are refused", func(t *testing.T) {
		for _, c := range []struct{ name, via string }{
			{"fbsock_", "IDENTIFIED VIA unix_socket"},
			{"fbor_", "IDENTIFIED VIA mysql_native_password USING PASSWORD('" + secret + "') OR unix_socket"},
		} {
			name := c.name + user[4:]
			testbed.MustExec(t, root, "CREATE USER '"+name+"'@'127.0.0.1' "+c.via)
			t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS '" + name + "'@'127.0.0.1'") })
			me := loginErr(t, userDSN(name, secret, p.addr, ""))
			if me == nil || me.Number != 1251 || !strings.HasPrefix(me.Message, "lockproxy: account '"+name+"'@'127.0.0.1' logs in with ") {
				t.Errorf("%s: %v, want lockproxy's 1251", name, me)
			}
		}
	})
}

// TestFromBackendUsersEntryWins: a users: entry is checked against its
// own password, not the account's hash, under users.from_backend.
func TestFromBackendUsersEntryWins(t *testing.T) {
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	p, _ := fromBackendProxy(t, func(c *rules.Config) {
		c.Users = append(c.Users, rules.User{User: user, Password: secret + "-listed"})
	})
	// The account's own password is not the listed one: lockproxy itself
	// refuses it.
	if me := loginErr(t, userDSN(user, secret, p.addr, db)); me == nil || me.Number != 1045 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("the account's password: %v, want lockproxy's 1045", me)
	}
	// The listed one passes lockproxy and opens the backend connection
	// with itself, which MariaDB refuses.
	if me := loginErr(t, userDSN(user, secret+"-listed", p.addr, db)); !deniedByMariaDB(me) {
		t.Fatalf("the listed password: %v, want MariaDB's own access denied", me)
	}
}

// deniedByMariaDB reports whether a login was refused by MariaDB itself
// (1045, or 1698 for a COM_CHANGE_USER to an account it no longer has),
// relayed by lockproxy as MariaDB sent it.
func deniedByMariaDB(me *gosql.MySQLError) bool {
	return me != nil && string(me.SQLState[:]) == "28000" && (me.Number == 1045 || me.Number == 1698) &&
		!strings.HasPrefix(me.Message, "lockproxy:")
}

// checkNoBytes fails when a logged line holds any of secrets (by what
// each is).
func checkNoBytes(t *testing.T, logs *observer.ObservedLogs, secrets map[string]string) {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		line := buf.String()
		buf.Free()
		for what, s := range secrets {
			if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
				t.Errorf("%s logged: %s", what, line)
			}
		}
	}
}

// TestFromBackendTLSReplica: an account read from the primary that MariaDB
// lets in only over TLS logs in through lockproxy with backends.tls, and
// its reads on the replica run as the account too.
func TestFromBackendTLSReplica(t *testing.T) {
	bed := testbedFor(t)
	if bed.TLSCA == "" {
		t.Fatal("the test bed has no TLS CA (scripts/testbed.sh up makes it)")
	}
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	root := base.direct(t, "", "")
	testbed.MustExec(t, root, "ALTER USER '"+user+"'@'127.0.0.1' REQUIRE SSL")
	p, _ := fromBackendProxy(t, func(c *rules.Config) {
		c.Backends.Replicas = []string{bed.ReplicaAddr}
		c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
		c.Backends.TLS = &rules.TLSClientConfig{CA: bed.TLSCA}
	})
	app := openDB(t, userDSN(user, secret, p.addr, db))
	tx, err := app.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var cur, name, cipher string
	if err := tx.QueryRow("SELECT CURRENT_USER()").Scan(&cur); err != nil || cur != user+"@127.0.0.1" {
		t.Fatalf("CURRENT_USER() on the primary = %q, %v", cur, err)
	}
	if err := tx.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil || cipher == "" {
		t.Fatalf("the primary session's Ssl_cipher = %q, %v; want a cipher", cipher, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var id int
		if err := app.QueryRow("SELECT @@server_id, CURRENT_USER() FROM sku LIMIT 1").Scan(&id, &cur); err != nil {
			t.Fatal(err)
		}
		if id == replicaID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no read reached the replica within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cur != user+"@127.0.0.1" {
		t.Errorf("CURRENT_USER() on the replica = %q, want %s@127.0.0.1", cur, user)
	}
}

// TestFromBackendPerUser: users[].from_backend serves that one account
// from the primary; accounts not listed are not served.
func TestFromBackendPerUser(t *testing.T) {
	base, db := lockSchema(t)
	listed, secret := secretUser(t, base, db)
	other, otherSecret := secretUser(t, base, db)
	core, _ := observer.New(zapcore.DebugLevel)
	p := observedProxy(t, observed{log: zap.New(core), edit: func(c *rules.Config) {
		c.Users = append(c.Users, rules.User{User: listed, FromBackend: true})
	}})
	app := openDB(t, userDSN(listed, secret, p.addr, db))
	var cur string
	if err := app.QueryRow("SELECT CURRENT_USER()").Scan(&cur); err != nil || cur != listed+"@127.0.0.1" {
		t.Fatalf("CURRENT_USER() = %q, %v", cur, err)
	}
	if me := loginErr(t, userDSN(other, otherSecret, p.addr, db)); me == nil || me.Number != 1045 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("an account not listed: %v, want lockproxy's 1045", me)
	}
}

// TestFromBackendRereadLimited: failed logins read the accounts again at
// most once per accountsRereadGap, whatever names they try: those of one
// gap share one read.
func TestFromBackendRereadLimited(t *testing.T) {
	p, _ := fromBackendProxy(t, nil)
	p.srv.accounts.mu.Lock()
	p.srv.accounts.gap = accountsRereadGap
	p.srv.accounts.lastStart = time.Time{} // the first failure reads at once
	p.srv.accounts.mu.Unlock()
	before := value(t, p.reg, "lockproxy_account_reads_total", "result=success")
	start := time.Now()
	const tries = 12
	errs := make(chan *gosql.MySQLError, tries)
	for i := range tries {
		go func() {
			db, err := openDBErr(userDSN(fmt.Sprintf("nobody_%d", i), "guess", p.addr, ""))
			if err == nil {
				_ = db.Close()
			}
			var me *gosql.MySQLError
			errors.As(err, &me)
			errs <- me
		}()
	}
	for range tries {
		if me := <-errs; me == nil || me.Number != 1045 {
			t.Errorf("an unknown user: %v, want 1045", me)
		}
	}
	elapsed := time.Since(start)
	reads := value(t, p.reg, "lockproxy_account_reads_total", "result=success") - before
	if reads < 1 {
		t.Errorf("%d failed logins read the accounts %v times, want at least once", tries, reads)
	}
	if limit := 1 + float64(elapsed/accountsRereadGap); reads > limit {
		t.Errorf("%d failed logins in %v read the accounts %v times, want at most %v", tries, elapsed, reads, limit)
	}
	t.Logf("%d failed logins in %v: %v reads of the accounts", tries, elapsed, reads)
}

// TestFromBackendClientPlugins: whichever plugin lockproxy announces and
// the client starts with, an account read from the primary is switched to
// mysql_native_password and logs in; a wrong password gets lockproxy's
// 1045. Clients: the mariadb CLI (libmariadb) and go-sql-driver.
func TestFromBackendClientPlugins(t *testing.T) {
	cli := requireTool(t, "mariadb", "--version")
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	for _, announced := range []string{mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD} {
		p, _ := fromBackendProxyAnnouncing(t, announced, nil)
		host, port, _ := net.SplitHostPort(p.addr)
		for _, plugin := range []string{mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD} {
			for _, pw := range []string{secret, "wrong-password"} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				out, err := exec.CommandContext(ctx, cli, "-h"+host, "-P"+port, "-u"+user, "-p"+pw,
					"--default-auth="+plugin, "--batch", "--skip-column-names", "-e", "SELECT CURRENT_USER()").CombinedOutput()
				cancel()
				got := strings.TrimSpace(string(out))
				if pw == secret {
					if err != nil || got != user+"@127.0.0.1" {
						t.Errorf("announced %s, client %s: %v: %s", announced, plugin, err, got)
					}
				} else if err == nil || !strings.HasPrefix(got, "ERROR 1045 (28000): lockproxy: Access denied") {
					t.Errorf("announced %s, client %s, wrong password: %v: %s", announced, plugin, err, got)
				}
			}
		}
		app := openDB(t, userDSN(user, secret, p.addr, db))
		var cur string
		if err := app.QueryRow("SELECT CURRENT_USER()").Scan(&cur); err != nil || cur != user+"@127.0.0.1" {
			t.Errorf("announced %s, go-sql-driver: CURRENT_USER() = %q, %v", announced, cur, err)
		}
	}
}

// TestFromBackendChangeUser: COM_CHANGE_USER to an account read from the
// primary proves its password as a login does, and the session then runs
// as that account; a wrong password is refused by lockproxy.
func TestFromBackendChangeUser(t *testing.T) {
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	p, _ := fromBackendProxy(t, nil)
	h := dialHand(t, p.addr)
	h.loginWith(mysql.AUTH_NATIVE_PASSWORD, p.bed.User, mysql.CalcNativePassword(h.salt, []byte(p.bed.Password)), false)
	if got := h.outcome(); got != "" {
		t.Fatalf("login: %s", got)
	}
	changeUser := func(password string) string {
		h.seq = 0
		b := append([]byte{mysql.COM_CHANGE_USER}, user...)
		answer := mysql.CalcNativePassword(h.salt, []byte(password))
		b = append(append(b, 0, byte(len(answer))), answer...)
		b = append(b, 0, 45, 0) // no database, utf8mb4_general_ci
		h.write(append(append(b, mysql.AUTH_NATIVE_PASSWORD...), 0))
		return h.outcome()
	}
	// The privileged account may read mysql.global_priv; the account not.
	readsPriv := func() string {
		h.seq = 0
		h.write(append([]byte{mysql.COM_QUERY}, "SELECT 1 FROM mysql.global_priv LIMIT 0"...))
		p := h.read()
		if len(p) > 3 && p[0] == mysql.ERR_HEADER {
			return fmt.Sprint(binary.LittleEndian.Uint16(p[1:]))
		}
		for len(p) == 0 || (p[0] != mysql.OK_HEADER && p[0] != mysql.EOF_HEADER) {
			p = h.read()
		}
		return "ok"
	}
	if got := readsPriv(); got != "ok" {
		t.Fatalf("lockproxy's own account: %s", got)
	}
	if got := changeUser("wrong"); !strings.HasPrefix(got, "1045 lockproxy: Access denied") {
		t.Fatalf("COM_CHANGE_USER with a wrong password: %q, want lockproxy's 1045", got)
	}
	if got := changeUser(secret); got != "" {
		t.Fatalf("COM_CHANGE_USER: %s", got)
	}
	if got := readsPriv(); got != "1142" {
		t.Fatalf("after COM_CHANGE_USER to %s: %s, want 1142", user, got)
	}
}

// BenchmarkLogin compares a login (with its first statement) of a user
// listed in users with one of an account read from the primary, whose
// pooled backend connection logs in again with COM_CHANGE_USER.
func BenchmarkLogin(b *testing.B) {
	base := startProxy(b, nil)
	root := base.direct(b, "", "")
	user, secret := "bench_fb", "bench-secret"
	testbed.MustExec(b, root, "CREATE USER IF NOT EXISTS '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"'")
	b.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS '" + user + "'@'127.0.0.1'") })
	p := startProxy(b, func(c *rules.Config) { c.UsersFromBackend = true })
	for _, c := range []struct{ name, user, password string }{
		{"listed", p.bed.User, p.bed.Password},
		{"from_backend", user, secret},
	} {
		b.Run(c.name, func(b *testing.B) {
			dsn := userDSN(c.user, c.password, p.addr, "")
			for b.Loop() {
				db, err := sql.Open("mysql", dsn)
				if err != nil {
					b.Fatal(err)
				}
				var one int
				if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
					b.Fatal(err)
				}
				_ = db.Close()
			}
		})
	}
}

// TestFromBackendMultiplexedBorrows: a multiplexing session of an account
// read from the primary borrows a connection for every statement and logs
// in again only at its own login: MariaDB judges logins, not loans. Once
// the account is dropped, a session logged in before goes on, as its own
// connection would (on the connections of its account already open; with
// a login per loan its next statement was refused), while a new login is
// refused by MariaDB.
func TestFromBackendMultiplexedBorrows(t *testing.T) {
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)
	root := base.direct(t, "", "")
	p, _ := fromBackendProxy(t, multiplexed(2))
	gone := "fbmux_" + user[4:]
	testbed.MustExec(t, root, "CREATE USER '"+gone+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"'",
		"GRANT SELECT ON `"+db+"`.* TO '"+gone+"'@'127.0.0.1'")
	t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS '" + gone + "'@'127.0.0.1'") })
	early := openDB(t, userDSN(gone, secret, p.addr, db))
	c, err := early.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func(when string) {
		t.Helper()
		for i := range 5 {
			var v int
			if err := c.QueryRowContext(context.Background(), "SELECT stock FROM sku WHERE sku_id = 1").Scan(&v); err != nil {
				t.Fatalf("statement %d %s: %v", i, when, err)
			}
		}
	}
	read("before the drop")
	testbed.MustExec(t, root, "DROP USER '"+gone+"'@'127.0.0.1'")
	read("after the drop, of the session logged in before it")
	if me := loginErr(t, userDSN(gone, secret, p.addr, db)); !deniedByMariaDB(me) {
		t.Fatalf("a new login of the dropped account: %v, want MariaDB's own access denied", me)
	}
}
