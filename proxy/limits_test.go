package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gosql "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"

	"github.com/lockproxy/lockproxy/rules"
)

// selfSigned writes a throwaway certificate and key for 127.0.0.1.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockproxy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLS(t *testing.T) {
	cert, key := selfSigned(t)
	for _, require := range []bool{false, true} {
		p := startProxy(t, func(c *rules.Config) {
			c.Proxy.TLS = &rules.TLSConfig{Cert: cert, Key: key}
			c.Proxy.RequireTLS = require
		})
		// tls=skip-verify fails unless the proxy offers TLS and the
		// handshake switches to it.
		db := openDB(t, p.bed.DSN(p.addr, "", "tls=skip-verify"))
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("query over TLS: %v", err)
		}
		plain, _ := sql.Open("mysql", p.bed.DSN(p.addr, "", "tls=false"))
		err := plain.Ping()
		plain.Close()
		switch {
		case require && (err == nil || !strings.Contains(err.Error(), "must use TLS")):
			t.Errorf("require_tls: a plain client was let in (%v)", err)
		case !require && err != nil:
			t.Errorf("TLS optional: a plain client was refused: %v", err)
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) { c.Proxy.IdleTimeout = rules.Duration(300 * time.Millisecond) })
	db := p.db(t, "", "")
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 5*time.Second, "the idle session is closed", func() bool {
		p.srv.mu.Lock()
		defer p.srv.mu.Unlock()
		return len(p.srv.sessions) == 0
	})
}

// TestIdleTimeoutKeptDeadline: the idle timeout's read deadline stays set
// across commands (idledeadline.go), so one set for an earlier wait can
// pass while the session has been idle less than the timeout: the
// session must go on waiting, and end only once it has been idle the
// whole timeout. With a timeout of 4s the slack is 1s: a command 0.7s
// after the first wait began leaves that wait's deadline set, which then
// passes 3.3s into the session's idle time. A command sent 0.4s after
// it must be answered, and so must one whose packet came half before it
// and half 0.3s after (its reads must not end at it either); the session
// must end no sooner than 4s after the last command. When the machine
// is too busy to keep the timeline (a command sent late), the round
// proves nothing and is run again.
func TestIdleTimeoutKeptDeadline(t *testing.T) {
	const idle = 4 * time.Second
	p := startProxy(t, func(c *rules.Config) { c.Proxy.IdleTimeout = rules.Duration(idle) })
	sessions := func() int {
		p.srv.mu.Lock()
		defer p.srv.mu.Unlock()
		return len(p.srv.sessions)
	}
	// DO 1 as one COM_QUERY packet, and the OK it gets.
	do1 := []byte{5, 0, 0, 0, mysql.COM_QUERY, 'D', 'O', ' ', '1'}
	answered := func(nc net.Conn) error {
		_ = nc.SetReadDeadline(time.Now().Add(idle))
		h := make([]byte, 4)
		if _, err := io.ReadFull(nc, h); err != nil {
			return err
		}
		b := make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
		if _, err := io.ReadFull(nc, b); err != nil {
			return err
		}
		if len(b) == 0 || b[0] != mysql.OK_HEADER {
			return fmt.Errorf("not an OK: % x", b)
		}
		return nil
	}
	probes := []struct {
		name string
		// at is when the probe starts, after the first wait began;
		// it sends its last byte busy later.
		at, busy time.Duration
		run      func(nc net.Conn) error
	}{
		{"a command after the deadline", idle + 400*time.Millisecond, 0, func(nc net.Conn) error {
			if _, err := nc.Write(do1); err != nil {
				return err
			}
			return answered(nc)
		}},
		{"a command split across the deadline", idle - 300*time.Millisecond, 600 * time.Millisecond, func(nc net.Conn) error {
			if _, err := nc.Write(do1[:6]); err != nil {
				return err
			}
			time.Sleep(600 * time.Millisecond) // the probe's busy
			if _, err := nc.Write(do1[6:]); err != nil {
				return err
			}
			return answered(nc)
		}},
	}
	for _, pr := range probes {
		for round := 1; ; round++ {
			if round > 3 {
				t.Fatalf("%s: the machine never kept the timeline for three rounds: nothing was shown", pr.name)
			}
			c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
			if err != nil {
				t.Fatal(err)
			}
			first := time.Now() // the session's first wait began before this
			time.Sleep(700 * time.Millisecond)
			if _, err := c.Execute("SELECT 1"); err != nil {
				t.Fatal(err)
			}
			idleSince := time.Now()
			late := idleSince.Sub(first) > 900*time.Millisecond // the first deadline was set again
			if !late {
				// The first wait's deadline passes by first+4s; the
				// session is idle until idleSince+4s.
				time.Sleep(time.Until(first.Add(pr.at)))
			}
			start := time.Now()
			if late || start.Add(pr.busy).After(idleSince.Add(idle-100*time.Millisecond)) {
				_ = c.Close()
				testbed.Eventually(t, 3*idle, "the round's session ends", func() bool { return sessions() == 0 })
				continue
			}
			if err := pr.run(c.Conn.Conn); err != nil {
				t.Fatalf("%s: a session idle %v of its %v timeout was ended: %v", pr.name, start.Sub(idleSince).Round(time.Millisecond), idle, err)
			}
			last := time.Now()
			testbed.Eventually(t, 3*idle, "the idle session is closed", func() bool { return sessions() == 0 })
			if ended := time.Since(last); ended < idle-100*time.Millisecond {
				t.Fatalf("%s: the session ended %v after its last command, before its %v timeout", pr.name, ended.Round(time.Millisecond), idle)
			}
			_ = c.Close()
			break
		}
	}
}

// TestIdleTimeoutLoadData: the content of a LOAD DATA LOCAL is read in the
// middle of its command, with no idle timeout: a client whose file takes
// longer than the timeout to arrive is not cut off by the deadline the
// command's wait left set (idledeadline.go).
func TestIdleTimeoutLoadData(t *testing.T) {
	const idle = time.Second
	p := startProxy(t, func(c *rules.Config) { c.Proxy.IdleTimeout = rules.Duration(idle) })
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE ld (id INT PRIMARY KEY)")
	gosql.RegisterReaderHandler("lockproxy_slow", func() io.Reader { return &slowReader{wait: idle + idle/2, r: strings.NewReader("1\n2\n3\n")} })
	h := p.db(t, db, "")
	h.SetMaxOpenConns(1)
	if _, err := h.Exec("SELECT 1"); err != nil { // the wait after it keeps a deadline set
		t.Fatal(err)
	}
	if _, err := h.Exec("LOAD DATA LOCAL INFILE 'Reader::lockproxy_slow' INTO TABLE ld"); err != nil {
		t.Fatalf("LOAD DATA LOCAL whose content came after the idle timeout: %v", err)
	}
	var n int
	if err := h.QueryRow("SELECT COUNT(*) FROM ld").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows loaded: %d, %v; want 3", n, err)
	}
}

// slowReader gives r's content after wait.
type slowReader struct {
	wait time.Duration
	r    io.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.wait > 0 {
		time.Sleep(s.wait)
		s.wait = 0
	}
	return s.r.Read(p)
}

// fakeClock is a throttle's clock that tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestThrottle() (*loginThrottle, *fakeClock) {
	th := newLoginThrottle()
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	th.now = clk.now
	return th, clk
}

// attempt runs one attempt to its end, as a session would: refused
// reports whether the throttle refused it before its password was checked;
// penalty is what a failure cost its counts.
func attempt(th *loginThrottle, user, host string, ok bool) (refused bool, penalty time.Duration) {
	turn, admitted := th.admit(user, host)
	if !admitted {
		return true, 0
	}
	defer th.release(turn)
	if ok {
		th.succeeded(user, host, turn)
		return false, 0
	}
	return false, th.failed(user, host, turn)
}

// TestLoginThrottle: past the free failures, each failure holds a slot of
// its count for a penalty that doubles up to maxLoginDelay; while every
// slot is held, attempts are refused unchecked; nobody is ever made to
// wait, and a correct password is admitted whenever a slot is free.
func TestLoginThrottle(t *testing.T) {
	th, clk := newTestThrottle()
	for i := 0; i < freeLogins; i++ {
		if refused, d := attempt(th, "app", "10.0.0.1", false); refused || d != 0 {
			t.Fatalf("free attempt %d: refused %v, penalty %v", i, refused, d)
		}
	}
	var last time.Duration
	for i := 0; i < 10; i++ {
		refused, d := attempt(th, "app", "10.0.0.1", false)
		if refused || d < last || d == 0 || d > maxLoginDelay {
			t.Fatalf("after %d more failures: refused %v, penalty %v (previous %v)", i, refused, d, last)
		}
		last = d
		clk.t = clk.t.Add(d) // the slot frees
	}
	if last != maxLoginDelay {
		t.Errorf("penalty capped at %v, want %v", last, maxLoginDelay)
	}
	for i := 0; i < maxWaiting; i++ {
		if refused, _ := attempt(th, "app", "10.0.0.1", false); refused {
			t.Fatalf("guess %d refused with a slot free", i)
		}
	}
	if refused, _ := attempt(th, "app", "10.0.0.1", true); !refused {
		t.Error("an attempt was checked while every slot of its count was held")
	}
	if refused, _ := attempt(th, "app", "10.0.0.2", true); refused {
		t.Error("another address is refused")
	}
	clk.t = clk.t.Add(maxLoginDelay)
	if refused, _ := attempt(th, "app", "10.0.0.1", true); refused {
		t.Error("the correct password is refused once a slot freed")
	}
	if refused, d := attempt(th, "app", "10.0.0.1", false); refused || d != 0 {
		t.Errorf("after a successful login a failure is refused %v, penalised %v", refused, d)
	}
	clk.t = clk.t.Add(2 * throttleWindow)
	if refused, d := attempt(th, "other", "10.0.0.1", false); refused || d != 0 {
		t.Errorf("after the window passed: refused %v, penalty %v", refused, d)
	}
}

// TestLoginThrottleParallel: attempts on a throttled account are checked
// maxWaiting at a time; the rest are refused at once. A check that ends
// in success frees its slot at once; one that fails holds it.
func TestLoginThrottleParallel(t *testing.T) {
	th, clk := newTestThrottle()
	for i := 0; i < freeLogins+3; i++ {
		attempt(th, "app", "10.0.0.1", false)
	}
	clk.t = clk.t.Add(time.Minute - time.Second) // every slot free, the failures still counted
	var turns []loginTurn
	refused := 0
	for i := 0; i < 200; i++ {
		turn, ok := th.admit("app", "10.0.0.1")
		if !ok {
			refused++
			continue
		}
		turns = append(turns, turn)
	}
	if len(turns) != maxWaiting || refused != 200-maxWaiting {
		t.Fatalf("%d attempts admitted, %d refused; want %d admitted", len(turns), refused, maxWaiting)
	}
	th.succeeded("app", "10.0.0.1", turns[0])
	th.release(turns[0])
	if _, ok := th.admit("app", "10.0.0.1"); !ok {
		t.Error("the slot of a successful login is still held")
	}
}

// TestLoginThrottleSpray: one address trying one password on many user
// names is slowed on its own count; an account that logged in from it
// before is not.
func TestLoginThrottleSpray(t *testing.T) {
	th, _ := newTestThrottle()
	attempt(th, "app", "10.0.0.9", true) // a user who knows the password, before the spray
	for i := 0; i < freeHostLogins+maxWaiting; i++ {
		if refused, _ := attempt(th, fmt.Sprintf("user%d", i), "10.0.0.9", false); refused {
			t.Fatalf("attempt %d (a fresh name) refused", i)
		}
	}
	if refused, _ := attempt(th, "yet-another-name", "10.0.0.9", false); !refused {
		t.Error("the address's next attempt, on a fresh name, is checked while its slots are held")
	}
	if refused, _ := attempt(th, "app", "10.0.0.9", true); refused {
		t.Error("a user who logged in from the address before is refused because of the spray")
	}
	if refused, _ := attempt(th, "app", "10.0.0.10", true); refused {
		t.Error("another address is refused")
	}
}

// TestLoginThrottleBounded: the table keeps at most maxTracked counts
// whatever names and addresses are tried, and long names are kept short.
func TestLoginThrottleBounded(t *testing.T) {
	th, clk := newTestThrottle()
	long := strings.Repeat("x", 4000)
	for i := 0; i < 30000; i++ {
		th.failed(fmt.Sprintf("%s%d", long, i), fmt.Sprintf("10.1.%d.%d", i/250, i%250), loginTurn{})
		clk.t = clk.t.Add(time.Millisecond)
	}
	if n := th.tracked(); n > maxTracked {
		t.Errorf("%d counts tracked, want at most %d", n, maxTracked)
	}
	for _, k := range th.keys.Keys() {
		if len(k) > 2*maxKeyName+40 {
			t.Fatalf("a count is kept under a %d-byte key", len(k))
		}
	}
}

// TestUserMaxConnections: users[].max_connections bounds one user's
// logged-in sessions, at login and at COM_CHANGE_USER, with MariaDB's
// 1203 from lockproxy; other users and the refused session go on, and a
// session that ends makes room.
func TestUserMaxConnections(t *testing.T) {
	base := startProxy(t, nil)
	capped := rules.User{User: "lp_capped", Password: "capped-pw", MaxConnections: 2}
	testbed.MustExec(t, base.direct(t, "", ""), "CREATE USER IF NOT EXISTS 'lp_capped'@'%' IDENTIFIED BY 'capped-pw'")
	p := startProxy(t, func(c *rules.Config) { c.Users = append(c.Users, capped) })
	login := func(u, pw string) (*client.Conn, error) { return client.Connect(p.addr, u, pw, "") }
	a, err := login(capped.User, capped.Password)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := login(capped.User, capped.Password)
	if err != nil {
		t.Fatal(err)
	}
	_, err = login(capped.User, capped.Password)
	wantCode(t, err, 1203)
	var me *mysql.MyError
	if errors.As(err, &me) && (me.State != "42000" || !strings.Contains(me.Message, "lp_capped")) {
		t.Errorf("refused login: %q (%s); want SQLSTATE 42000 naming the user", me.Message, me.State)
	}
	// Another user is not bounded by it.
	other, err := login(p.bed.User, p.bed.Password)
	if err != nil {
		t.Fatalf("another user's login: %v", err)
	}
	defer other.Close()
	// COM_CHANGE_USER to the capped user is refused too; the session stays
	// its own user's.
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, "", false)
	err = r.changeUser(capped.User, capped.Password, "")
	wantCode(t, err, 1203)
	if rows, err := r.query("SELECT CURRENT_USER()"); err != nil || !strings.Contains(strings.Join(rows, ","), p.bed.User+"@") {
		t.Errorf("after the refused change: %q, %v; want still %s", rows, err, p.bed.User)
	}
	// A session that ends makes room.
	b.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := login(capped.User, capped.Password)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("login after one of the user's sessions ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Ping(); err != nil {
		t.Errorf("a session within the cap: %v", err)
	}
}

// TestLoginThrottleAnswersAtOnce: through the wire, wrong passwords get
// 1045 and the right one logs in while its account has a free slot, with
// no wait on either; once the account's failures past the free ones hold
// every slot, every
// attempt on it is refused unchecked (1129), the right password too, until
// a slot frees. The throttle's clock stands still, so no slot frees here.
func TestLoginThrottleAnswersAtOnce(t *testing.T) {
	p := startProxy(t, nil)
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	p.srv.logins.mu.Lock()
	p.srv.logins.now = clk.now
	p.srv.logins.mu.Unlock()
	code := func(password string) uint16 {
		t.Helper()
		c, err := client.ConnectWithTimeout(p.addr, p.bed.User, password, "", 30*time.Second)
		if err == nil {
			c.Close()
			return 0
		}
		var me *mysql.MyError
		if !errors.As(err, &me) {
			t.Fatalf("login with password %q: %v, want a MySQL error", password, err)
		}
		return me.Code
	}
	for i := 0; i < freeLogins+1; i++ {
		if got := code("wrong"); got != mysql.ER_ACCESS_DENIED_ERROR {
			t.Fatalf("wrong password %d: error %d, want 1045", i, got)
		}
	}
	for i := 0; i < 3; i++ {
		if got := code(p.bed.Password); got != 0 {
			t.Fatalf("the right password after %d failures: error %d, want a login", freeLogins+1, got)
		}
	}
	// A login forgets the account's failures: a new run of guesses.
	for i := 0; i < freeLogins+maxWaiting; i++ {
		if got := code("wrong"); got != mysql.ER_ACCESS_DENIED_ERROR {
			t.Fatalf("wrong password: error %d, want 1045", got)
		}
	}
	if got := code(p.bed.Password); got != mysql.ER_HOST_IS_BLOCKED {
		t.Errorf("with every slot held: error %d, want 1129", got)
	}
}
