package proxy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	gosql "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAuditSlowWait: a lock wait longer than locks.slow_wait is written to
// the audit log with the rule, the keys, the waiting session and how long
// it waited.
func TestAuditSlowWait(t *testing.T) {
	for name, locker := range map[string]func(*testing.T, *lockmgr.Metrics, *zap.Logger) lockmgr.Locker{
		"memory": memLocker, "redis": redisLocker(time.Second),
	} {
		t.Run(name, func(t *testing.T) { testAuditSlowWait(t, locker) })
	}
}

func testAuditSlowWait(t *testing.T, locker func(*testing.T, *lockmgr.Metrics, *zap.Logger) lockmgr.Locker) {
	_, db := lockSchema(t)
	core, logs := observer.New(zapcore.DebugLevel)
	p := observedProxy(t, observed{log: zap.New(core), edit: lockRules(db, 50*time.Millisecond), locker: locker})
	a, b := p.db(t, db, ""), p.db(t, db, "")
	// The waiter is released only once it has waited twice slow_wait.
	var waiter, holder LockInfo
	err := contend(t, a, b, "UPDATE sku SET stock = stock - 1 WHERE sku_id = 1", func() bool {
		for _, l := range p.srv.Locks() {
			if l.State == "waiting" && l.AgeSec >= 0.1 {
				waiter = l
			}
			if l.State == "held" {
				holder = l
			}
		}
		return waiter.Owner != "" && holder.Owner != ""
	})
	// What /debug/locks shows of the wait came from the lock backend.
	if waiter.Holder != holder.Owner || waiter.Position != 1 {
		t.Errorf("waiting entry: holder %q position %d, want %q and 1", waiter.Holder, waiter.Position, holder.Owner)
	}
	if err != nil {
		t.Fatal(err)
	}

	var lines []observer.LoggedEntry
	for _, e := range logs.FilterLoggerName("audit").FilterMessage("slow lock wait").All() {
		if e.ContextMap()["session"] == uint32(waiter.Session) {
			lines = append(lines, e)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one slow-wait audit line for session %d, got %d (all audit lines: %v)",
			waiter.Session, len(lines), logs.FilterLoggerName("audit").All())
	}
	f := lines[0].ContextMap()
	if f["rule"] != "sku-stock" || f["user"] != p.bed.User {
		t.Errorf("rule/user: %v", f)
	}
	if keys, _ := f["keys"].([]any); len(keys) != 1 || keys[0] != waiter.Key {
		t.Errorf("keys = %v, want [%s]", f["keys"], waiter.Key)
	}
	if w, _ := f["waited"].(time.Duration); w < 100*time.Millisecond {
		t.Errorf("waited = %v, but the session was seen waiting 100ms", f["waited"])
	}
	if hs, _ := f["holders"].([]any); len(hs) != 1 || hs[0] != holder.Owner {
		t.Errorf("holders = %v, want [%s] (the session holding the row, session %d)", f["holders"], holder.Owner, holder.Session)
	}
	if _, ok := f["client"].(string); !ok {
		t.Errorf("no client address: %v", f)
	}
	if lines[0].Level != zapcore.WarnLevel {
		t.Errorf("slow wait logged at %v", lines[0].Level)
	}
}

// TestAuditNoPasswords runs a whole session's life with a user whose
// password is known, logs at every level, and checks no line holds the
// password: not its login, not a refused login, not the audit lines of its
// waits and rejections, not statements carrying it as a parameter or a
// literal value.
func TestAuditNoPasswords(t *testing.T) {
	for _, plugin := range []string{mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD} {
		t.Run(plugin, func(t *testing.T) { testNoPasswords(t, plugin) })
	}
}

func testNoPasswords(t *testing.T, plugin string) {
	base, db := lockSchema(t)
	user, secret := secretUser(t, base, db)

	core, logs := observer.New(zapcore.DebugLevel)
	t.Cleanup(func() { checkNoSecret(t, logs, secret, user) }) // after the proxy has shut down
	lockEdit := lockRules(db, time.Millisecond)
	p := observedProxy(t, observed{log: zap.New(core), authPlugin: plugin, locker: memLocker, edit: func(c *rules.Config) {
		lockEdit(c)
		c.Users = append(c.Users, rules.User{User: user, Password: secret})
	}})
	dsn := func(password string) string {
		c := gosql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", p.addr, db
		return c.FormatDSN()
	}
	if h, err := openDBErr(dsn(secret + "-wrong")); err == nil {
		_ = h.Close()
		t.Fatal("a wrong password logged in")
	}
	app := openDB(t, dsn(secret))
	other := openDB(t, dsn(secret))
	testbed.MustExec(t, app,
		"UPDATE sku SET stock = 7 WHERE sku_id = 1",
		"INSERT INTO hot (id, v) VALUES (2, 42) ON DUPLICATE KEY UPDATE v = 42")
	if _, err := app.Exec("UPDATE sku SET stock = ? WHERE sku_id = ?", 6, 2); err != nil {
		t.Fatal(err)
	}
	// A parameter and a literal that must not reach the log either.
	if _, err := app.Exec("UPDATE sku SET stock = stock WHERE sku_id = ? AND ? <> ''", 1, secret+"-param"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("UPDATE sku SET stock = stock WHERE sku_id = 1 AND '" + secret + "-literal' <> ''"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("UPDATE sku SET stock = 0"); err == nil { // rejected: audited
		t.Fatal("unkeyed write ran")
	}
	if _, err := app.Exec("SELEC broken"); err == nil {
		t.Fatal("syntax error accepted")
	}
	tx, err := app.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE hot SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec("UPDATE hot SET v = 2 WHERE id = 1"); err == nil { // 1205: audited as slow
		t.Fatal("the held row was written")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := value(t, p.reg, "lockproxy_auth_failures_total", ""); n != 1 {
		t.Errorf("lockproxy_auth_failures_total = %v, want 1", n)
	}
}

// secretUser creates a MariaDB user with a random password and every
// privilege on db, dropped when the test ends.
func secretUser(t *testing.T, base *testProxy, db string) (user, secret string) {
	t.Helper()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	user, secret = "obs_"+hex.EncodeToString(rnd[:4]), "Pw-"+hex.EncodeToString(rnd[:])
	root := base.direct(t, "", "")
	testbed.MustExec(t, root, "CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY '"+secret+"'",
		"GRANT ALL ON `"+db+"`.* TO '"+user+"'@'127.0.0.1'")
	t.Cleanup(func() { _, _ = root.Exec("DROP USER '" + user + "'@'127.0.0.1'") })
	return user, secret
}

// checkNoSecret fails when any logged line, rendered as the JSON the
// production log writes, contains secret. It also insists the run logged
// lines naming user, so a silent logger cannot pass.
func checkNoSecret(t *testing.T, logs *observer.ObservedLogs, secret, user string) {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	mentions := 0
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		line := buf.String()
		buf.Free()
		if strings.Contains(line, secret) {
			t.Errorf("password logged: %s", line)
		}
		if strings.Contains(line, user) {
			mentions++
		}
	}
	if mentions == 0 {
		t.Errorf("no line of %d names user %s: the audit lines are missing", logs.Len(), user)
	}
}

// TestConnectionMetrics checks the client connection gauge follows the
// open connections and that a refused login is counted.
func TestConnectionMetrics(t *testing.T) {
	p := startProxy(t, nil)
	h := p.db(t, "", "")
	h.SetMaxIdleConns(3)
	conns := make([]*sql.Conn, 0, 3)
	for range 3 {
		c, err := h.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PingContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if n := value(t, p.reg, "lockproxy_client_connections", ""); n != 3 {
		t.Errorf("lockproxy_client_connections = %v with 3 open, want 3", n)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	_ = h.Close()
	testbed.Eventually(t, 10*time.Second, "lockproxy_client_connections back to 0", func() bool {
		return value(t, p.reg, "lockproxy_client_connections", "") == 0
	})
	bad := strings.Replace(p.bed.DSN(p.addr, "", ""), ":"+p.bed.Password+"@", ":not-"+p.bed.Password+"@", 1)
	if db, err := openDBErr(bad); err == nil {
		_ = db.Close()
		t.Fatal("a wrong password logged in")
	}
	if n := value(t, p.reg, "lockproxy_auth_failures_total", ""); n != 1 {
		t.Errorf("lockproxy_auth_failures_total = %v after one refused login, want 1", n)
	}
}

// openDBErr opens dsn and pings it, returning the login error.
func openDBErr(dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// TestSensitiveColumnsHidden: a rule's sensitive key column never shows
// its value: not in any log line (audit included, at every level), not in
// /debug/locks or SHOW LOCKPROXY LOCKS (the key carries a hash, the
// statement "?"), not in Redis, not in the 1205 message. The row is still
// one lock: a second session waits for it.
func TestSensitiveColumnsHidden(t *testing.T) {
	const pan = "4111111111111111"
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE card (pan VARCHAR(32) PRIMARY KEY, bal INT NOT NULL)",
		"INSERT INTO card VALUES ('"+pan+"', 100)", "CREATE TABLE note (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO note VALUES (1, 0)")
	core, logs := observer.New(zapcore.DebugLevel)
	rdb, prefix := testRedis(t)
	p := observedProxy(t, observed{log: zap.New(core), locker: func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
		return redislock.New(rdb, &redislock.Options{TTL: time.Second, Prefix: prefix, Logger: log, Metrics: m})
	}, edit: func(c *rules.Config) {
		c.Locks.SlowWait = rules.Duration(20 * time.Millisecond)
		c.Rules = []rules.Rule{{Name: "cards", Table: db + ".card", Key: []string{"pan"}, Sensitive: []string{"PAN"},
			Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(300 * time.Millisecond)},
			{Name: "notes", Table: db + ".note", Key: []string{"id"}, Lock: []string{rules.LockWrite},
				OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(time.Second)}}
	}})
	stmt := "UPDATE card SET bal = bal - 1 WHERE pan = '" + pan + "'"
	a, b := p.db(t, db, ""), p.db(t, db, "")
	tx, err := a.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(stmt); err != nil {
		t.Fatal(err)
	}

	locks := p.srv.Locks()
	if len(locks) != 1 || !strings.Contains(locks[0].Key, "/sha256:") || strings.Contains(locks[0].Key, pan) {
		t.Fatalf("/debug/locks shows %+v; want one key carrying the hash, not the value", locks)
	}
	if st := locks[0].Statement; strings.Contains(st, pan) || !strings.Contains(st, "?") {
		t.Errorf("statement shown as %q; want its literals replaced by ?", st)
	}
	// A session holding another rule's lock, now reading a card by its
	// number: its current statement is shown without the literal too.
	other, err := p.db(t, db, "").BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	var bal int
	if _, err := other.Exec("UPDATE note SET v = v + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if err := other.QueryRow("SELECT bal FROM card WHERE pan = '" + pan + "'").Scan(&bal); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, l := range p.srv.Locks() {
		if l.Rule == "notes" {
			seen = true
			if strings.Contains(l.Statement, pan) || !strings.Contains(l.Statement, "?") {
				t.Errorf("the notes lock's session shows %q", l.Statement)
			}
		}
	}
	if !seen {
		t.Error("the notes lock is not listed")
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	for _, row := range showLocks(t, b) {
		shown.WriteString(strings.Join(row, "\t") + "\t")
	}
	if !strings.Contains(shown.String(), locks[0].Key) || strings.Contains(shown.String(), pan) {
		t.Errorf("SHOW LOCKPROXY LOCKS: %q", shown.String())
	}

	// The row is one lock for everyone: b waits and gives up with 1205.
	_, err = b.Exec(stmt)
	if me := mysqlErr(t, err); me.Number != 1205 || strings.Contains(me.Message, pan) {
		t.Fatalf("second writer: want 1205 without the value, got %v", me)
	}
	names, err := rdb.Keys(context.Background(), prefix+":*").Result()
	if err != nil || len(names) == 0 {
		t.Fatalf("redis keys under %s: %v %v", prefix, names, err)
	}
	for _, n := range names {
		if strings.Contains(n, pan) {
			t.Errorf("redis key %q carries the value", n)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, p)
	if len(logs.FilterLoggerName("audit").FilterMessage("slow lock wait").All()) == 0 {
		t.Error("no slow-wait audit line was written: the check below would prove nothing")
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, pan) {
			t.Errorf("log line carries the sensitive value: %s", line)
		}
	}
}
