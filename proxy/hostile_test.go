package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// frame makes a physical packet.
func frame(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// TestPacketReaderBounds: a packet over the limit is refused from its
// header, before anything is allocated for it; one the memory budget
// cannot hold is read past and refused with 1041, and the next packet
// reads fine; a large buffer is given back after use.
func TestPacketReaderBounds(t *testing.T) {
	t.Run("limit before allocation", func(t *testing.T) {
		r := newPacketReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 1}), 4096)
		if _, _, err := r.readLogical(4096); !errors.Is(err, errPacketTooLarge) {
			t.Fatalf("want errPacketTooLarge, got %v", err)
		}
		if cap(r.buf) != 0 {
			t.Errorf("the reader allocated %d bytes for a packet it refused", cap(r.buf))
		}
	})
	t.Run("backend buffer given back", func(t *testing.T) {
		r := newPacketReader(bytes.NewReader(frame(0, make([]byte, 1<<20))), 4096)
		if _, p, err := r.readPhysical(); err != nil || len(p) != 1<<20 {
			t.Fatalf("1 MiB packet: %d bytes, %v", len(p), err)
		}
		r.shrink()
		if cap(r.buf) != 0 {
			t.Errorf("a backend reader keeps a %d-byte buffer after shrink", cap(r.buf))
		}
	})
	t.Run("budget", func(t *testing.T) {
		global := newMemBudget(1 << 20)
		mem := &sessionMem{global: global, limit: 512 << 10}
		var in bytes.Buffer
		in.Write(frame(0, bytes.Repeat([]byte{'a'}, 600<<10)))
		in.Write(frame(0, []byte("next")))
		in.Write(frame(0, bytes.Repeat([]byte{'b'}, 300<<10)))
		r := newPacketReader(&in, 4096)
		r.mem = mem
		_, _, err := r.readLogical(1 << 20)
		if se := toSQLError(err); !errors.Is(err, errOutOfMemory) || se.Code != erOutOfResources || !strings.HasPrefix(se.Msg, "lockproxy: ") {
			t.Fatalf("600 KiB over a 512 KiB session budget: want 1041, got %v", err)
		}
		if _, p, err := r.readLogical(1 << 20); err != nil || string(p) != "next" {
			t.Fatalf("packet after the refused one: %q, %v", p, err)
		}
		if _, p, err := r.readLogical(1 << 20); err != nil || len(p) != 300<<10 {
			t.Fatalf("300 KiB packet: %d bytes, %v", len(p), err)
		}
		if mem.used == 0 || global.used.Load() != mem.used {
			t.Errorf("a 300 KiB packet charged session %d, global %d", mem.used, global.used.Load())
		}
		r.shrink()
		if mem.used != 0 || global.used.Load() != 0 || cap(r.buf) != 0 {
			t.Errorf("after shrink: session %d, global %d, buffer %d", mem.used, global.used.Load(), cap(r.buf))
		}
	})
}

// TestPreAuthHugeHeader: clients announcing 16 MiB handshake packets are
// closed at once and cost nothing.
func TestPreAuthHugeHeader(t *testing.T) {
	p := startProxy(t, nil)
	var conns []net.Conn
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		readGreeting(t, c)
		_, _ = c.Write([]byte{0xff, 0xff, 0xff, 1, 'x'})
		conns = append(conns, c)
	}
	for _, c := range conns {
		expectClosed(t, c, 5*time.Second)
	}
	if used := settledMemory(p, 0); used != 0 {
		t.Errorf("memory budget holds %d bytes after the connections closed", used)
	}
	stillServes(t, p)
}

// TestHandshakeLimit: idle sockets that never log in fill at most
// max_handshakes and do not count against max_connections; the oldest is
// closed to make room, so real logins go on succeeding.
func TestHandshakeLimit(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) {
		c.Proxy.MaxHandshakes = 8
		c.Proxy.MaxConnections = 2
		c.Proxy.HandshakeTimeout = rules.Duration(time.Minute)
	})
	var idle []net.Conn
	for i := 0; i < 50; i++ {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		readGreeting(t, c)
		idle = append(idle, c)
	}
	for i := 0; i < 2; i++ { // both stay open until the test ends
		c, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, "", 5*time.Second)
		if err != nil {
			t.Fatalf("login %d with 50 idle sockets open: %v", i, err)
		}
		defer c.Close()
	}
	expectClosed(t, idle[0], 5*time.Second)
	if n := testutil.ToFloat64(p.srv.metrics.handshakes); n > 8 {
		t.Errorf("%v connections authenticating, over max_handshakes 8", n)
	}
	if n := testutil.ToFloat64(p.srv.metrics.handshakesEvicted); n < 40 {
		t.Errorf("%v handshakes evicted, want at least 40", n)
	}
	// max_connections still counts logged-in sessions.
	_, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, "", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "1040") {
		t.Fatalf("third login over max_connections 2: want 1040, got %v", err)
	}
}

// TestHandshakeFlood: sockets that reconnect as fast as they are closed,
// from another address, take handshake slots continuously; real logins
// still succeed every time, because a connection that has not answered the
// greeting, from the address holding the most handshakes, goes first.
func TestHandshakeFlood(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) {
		c.Proxy.MaxHandshakes = 8
		c.Proxy.HandshakeTimeout = rules.Duration(time.Minute)
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", p.addr)
				if err != nil {
					continue
				}
				go func() { <-ctx.Done(); _ = c.Close() }()
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}
		}()
	}
	testbed.Eventually(t, 10*time.Second, "the flood fills the handshake slots", func() bool {
		return testutil.ToFloat64(p.srv.metrics.handshakesEvicted) > 100
	})
	for i := 0; i < 20; i++ {
		c, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, "", 10*time.Second)
		if err != nil {
			t.Fatalf("login %d during the flood: %v", i, err)
		}
		if _, err := c.Execute("SELECT 1"); err != nil {
			t.Fatalf("query %d during the flood: %v", i, err)
		}
		c.Close()
	}
}

// emfileListener fails its first n accepts with EMFILE.
type emfileListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n > 0
	l.n--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptBackoff: running out of file descriptors makes accept back off
// and retry; Serve does not return, and logins succeed afterwards.
func TestAcceptBackoff(t *testing.T) {
	bed := testbedFor(t)
	cfg, err := rules.LoadBytes("t.yaml", []byte("users:\n  - user: "+bed.User+"\n    password: \""+bed.Password+
		"\"\nbackends:\n  primary: "+bed.PrimaryAddr+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(cfg, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(&emfileListener{Listener: ln, n: 6}) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve after shutdown: %v", err)
		}
	}()
	c, err := client.ConnectWithTimeout(ln.Addr().String(), bed.User, bed.Password, "", 10*time.Second)
	if err != nil {
		t.Fatalf("login after EMFILE: %v", err)
	}
	defer c.Close()
	select {
	case err := <-done:
		t.Fatalf("Serve returned on EMFILE: %v", err)
	default:
	}
	if n := testutil.ToFloat64(srv.metrics.acceptErrors); n != 6 {
		t.Errorf("accept errors counted: %v, want 6", n)
	}
	if !temporaryAccept(&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}) ||
		temporaryAccept(net.ErrClosed) {
		t.Error("temporaryAccept misjudges ENFILE or a closed listener")
	}
}

// limitsProxy is a proxy whose statements are analysed (one rule), with
// the given limits.
func limitsProxy(t *testing.T, edit func(*rules.ProxyConfig)) (*testProxy, string) {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, note TEXT)",
		"INSERT INTO sku VALUES (1, 10, ''), (2, 10, '')")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(time.Second)}}
		if edit != nil {
			edit(&c.Proxy)
		}
	}, memlock.New(nil, nil))
	return p, db
}

func wantCode(t *testing.T, err error, code uint16) {
	t.Helper()
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != code || !strings.HasPrefix(me.Message, "lockproxy: ") {
		t.Fatalf("want lockproxy error %d, got %v", code, err)
	}
}

// TestStatementLimits: statements too long or too deeply nested are
// refused before analysis with a MariaDB error, text and prepared alike;
// parentheses in literals do not count; the session goes on.
func TestStatementLimits(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) {
		pc.MaxNesting = 32
		pc.MaxStatementSize = 64 << 10
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nested := func(n int) string {
		return "SELECT stock FROM sku WHERE sku_id = " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n)
	}
	if _, err := c.Execute(nested(30)); err != nil {
		t.Fatalf("30 levels under max_nesting 32: %v", err)
	}
	_, err = c.Execute(nested(33))
	wantCode(t, err, erTooDeepNesting)
	_, err = c.Prepare(nested(200))
	wantCode(t, err, erTooDeepNesting)
	if _, err := c.Execute("SELECT '" + strings.Repeat("(", 1000) + "' /* ((((((((((((((((((((((((((((((((((( */"); err != nil {
		t.Fatalf("parentheses in a literal and a comment counted: %v", err)
	}
	// A size limit of lockproxy's, not a syntax error (1064): 1105. A
	// text is then read by its words alone (TestStatementTooLongToParse);
	// one that is no SELECT, INSERT, REPLACE, UPDATE or DELETE and a
	// prepared statement are refused.
	_, err = c.Execute("SET @v = '" + strings.Repeat("x", 70<<10) + "'")
	wantCode(t, err, erUnknown)
	_, err = c.Prepare("UPDATE sku SET note = '" + strings.Repeat("x", 70<<10) + "' WHERE sku_id = ?")
	wantCode(t, err, erUnknown)
	if r, err := c.Execute("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1"); err != nil || r.AffectedRows != 1 {
		t.Fatalf("session after refusals: %v", err)
	}
	if used := settledMemory(p, 0); used != 0 {
		t.Errorf("memory budget holds %d bytes between statements", used)
	}
}

// TestStatementTooLongInPackets: a statement of 16 MiB or more comes in
// several packets; lockproxy's refusal follows the last of them in
// sequence (a client checks), and the session goes on. The limit is set
// below the statement (by default it is max_allowed_packet, and such a
// statement is analysed and runs).
func TestStatementTooLongInPackets(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) { pc.MaxStatementSize = 64 << 10 })
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{16 << 20, 16<<20 - 11} { // over one packet; exactly one full packet and an empty one
		_, err = c.Execute("SET @v = '" + strings.Repeat("a", n) + "'")
		wantCode(t, err, erUnknown)
		if r, err := c.Execute("SELECT stock FROM sku WHERE sku_id = 1"); err != nil || len(r.Values) != 1 {
			t.Fatalf("after a refused statement of %d bytes: %v", n+9, err)
		}
	}
}

// TestStatementTooLongToParse: a text over proxy.max_statement_size whose
// first word is SELECT, INSERT, REPLACE, UPDATE or DELETE is read by its
// words alone, as a text the parser rejects: it runs on the primary
// unless it names a guarded table, whose rows it cannot key (on_unkeyed
// decides). A 16 MiB inline BLOB is stored through lockproxy with a rule.
func TestStatementTooLongToParse(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) { pc.MaxStatementSize = 64 << 10 })
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)")
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := strings.Repeat("x", 70<<10)
	r, err := c.Execute("SELECT '" + long + "' AS v")
	if err != nil {
		t.Fatalf("a long SELECT: %v", err)
	}
	if v, _ := r.GetString(0, 0); v != long {
		t.Fatalf("a long SELECT answered %d bytes", len(v))
	}
	if _, err := c.Execute("/* a dump's row */ INSERT INTO blobs VALUES (1, '" + long + "')"); err != nil {
		t.Fatalf("a long INSERT into an unguarded table: %v", err)
	}
	// The guarded table's rows cannot be keyed: refused (on_unkeyed:
	// reject), as is a text that hides it after a literal.
	for _, q := range []string{
		"UPDATE sku SET note = '" + long + "' WHERE sku_id = 1",
		"INSERT INTO sku VALUES (3, 1, '" + long + "')",
		"INSERT INTO blobs VALUES (2, '" + long + "'); UPDATE sku SET stock = 0 WHERE sku_id = 1",
	} {
		_, err = c.Execute(q)
		wantCode(t, err, erUnknown)
	}
	row := p.direct(t, db, "").QueryRow("SELECT (SELECT COUNT(*) FROM blobs), (SELECT SUM(stock) FROM sku), (SELECT MAX(LENGTH(note)) FROM sku)")
	var blobs, stock, note int
	if err := row.Scan(&blobs, &stock, &note); err != nil || blobs != 1 || stock != 20 || note != 0 {
		t.Fatalf("after the refusals: %d blobs, stock %d, a note of %d bytes (%v)", blobs, stock, note, err)
	}
	// A 16 MiB value inline, under the default limit.
	big := startProxyWith(t, func(cfg *rules.Config) {
		cfg.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn}}}
	}, memlock.New(nil, nil))
	bc, err := client.Connect(big.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if _, err := bc.Execute("INSERT INTO blobs VALUES (3, '" + strings.Repeat("b", 16<<20) + "')"); err != nil {
		t.Fatalf("a 16 MiB inline BLOB: %v", err)
	}
	if r, err := bc.Execute("SELECT LENGTH(b) FROM blobs WHERE id = 3"); err != nil {
		t.Fatal(err)
	} else if n, _ := r.GetInt(0, 0); n != 16<<20 {
		t.Fatalf("the 16 MiB BLOB has %d bytes", n)
	}
}

// TestParseBudget: a statement whose analysis the process's memory budget
// cannot hold is refused with 1041; the session goes on. A literal costs
// the analysis far less than code.
func TestParseBudget(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) {
		pc.MaxAllowedPacket = 1 << 20
		pc.SessionMemory = 2 << 20
		pc.MemoryBudget = 8 << 20
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 256 bytes a byte of text outside literals: 40 KiB need 10 MiB.
	inList := func(n int) string {
		return "SELECT stock FROM sku WHERE sku_id IN (1" + strings.Repeat(",1", n/2) + ")"
	}
	_, err = c.Execute(inList(40 << 10))
	wantCode(t, err, erOutOfResources)
	if _, err := c.Execute(inList(20 << 10)); err != nil {
		t.Fatalf("a statement within the budget: %v", err)
	}
	// 8 a byte inside a literal: 400 KiB need 3.2 MiB.
	if _, err := c.Execute("SELECT stock FROM sku WHERE note = '" + strings.Repeat("x", 400<<10) + "'"); err != nil {
		t.Fatalf("a long literal within the budget: %v", err)
	}
	if n := testutil.ToFloat64(p.srv.metrics.memoryRefused); n != 1 {
		t.Errorf("memory refusals counted: %v, want 1", n)
	}
}

// TestPreparedTextBudget: a prepared statement's text is kept for the
// statement's life and counts against session_memory: a session cannot
// hold more prepared text than its budget (once 600 statements of 300 KB
// took 300 MB); the prepare over it gets 1041, and closing a statement
// makes room again.
func TestPreparedTextBudget(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) {
		pc.MaxAllowedPacket = 1 << 20
		pc.SessionMemory = 2 << 20
		pc.MaxStatementSize = 1 << 20
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text := "SELECT stock FROM sku WHERE sku_id = ? AND note <> '" + strings.Repeat("x", 300<<10) + "'"
	var stmts []*client.Stmt
	for range 20 {
		st, err := c.Prepare(text)
		if err != nil {
			wantCode(t, err, erOutOfResources)
			break
		}
		stmts = append(stmts, st)
	}
	// 2 MiB holds six texts of 300 KiB at most, fewer with the packet
	// being read.
	if n := len(stmts); n < 3 || n > 6 {
		t.Fatalf("%d statements of 300 KiB prepared within a 2 MiB session budget", n)
	}
	if n := testutil.ToFloat64(p.srv.metrics.memoryRefused); n != 1 {
		t.Errorf("memory refusals counted: %v, want 1", n)
	}
	if _, err := stmts[0].Execute(1); err != nil {
		t.Fatalf("a statement kept within the budget: %v", err)
	}
	if err := stmts[0].Close(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Prepare(text)
	if err != nil {
		t.Fatalf("prepare after a close made room: %v", err)
	}
	if _, err := st.Execute(1); err != nil {
		t.Fatal(err)
	}
}

// sendLongData writes COM_STMT_SEND_LONG_DATA (no response).
func sendLongData(t *testing.T, c *client.Conn, id uint32, param uint16, data []byte) {
	t.Helper()
	p := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_SEND_LONG_DATA}, id)
	p = binary.LittleEndian.AppendUint16(p, param)
	c.ResetSequence()
	if err := c.WritePacket(append(make([]byte, 4), append(p, data...)...)); err != nil {
		t.Fatal(err)
	}
}

// TestLongDataBudget: long data is kept only for parameters the statement
// has, within the session's budget; when it does not fit, the execute is
// refused with 1041 (keys could not be derived) and the next one works.
func TestLongDataBudget(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) {
		pc.MaxAllowedPacket = 1 << 20
		pc.SessionMemory = 1 << 20
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	one, err := c.Prepare("UPDATE sku SET stock = stock + 1 WHERE sku_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	base := p.srv.mem.used.Load()
	for i := 0; i < 10; i++ {
		sendLongData(t, c, one.ID, 5000, bytes.Repeat([]byte{'7'}, 60<<10))
	}
	if _, err := c.Execute("SELECT 1"); err != nil { // the long data has arrived
		t.Fatal(err)
	}
	if got := settledMemory(p, base) - base; got != 0 {
		t.Errorf("long data kept for parameter 5000 of a 1-parameter statement: %d bytes", got)
	}
	// MariaDB remembers the bad parameter: reset the statement.
	c.ResetSequence()
	if err := c.WritePacket(append(make([]byte, 4), stmtID(mysql.COM_STMT_RESET, one.ID)...)); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.ReadPacket(); err != nil || resp[0] != mysql.OK_HEADER {
		t.Fatalf("COM_STMT_RESET: %q, %v", resp, err)
	}
	sendLongData(t, c, one.ID, 0, []byte("1"))
	if _, err := c.Execute("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if got := settledMemory(p, base+1) - base; got != 1 {
		t.Errorf("long data kept: %d bytes, want 1", got)
	}
	// The value comes from the long data: the packet binds only its type.
	c.ResetSequence()
	if err := c.WritePacket(append(make([]byte, 4), execute(one.ID, 0, []byte{mysql.MYSQL_TYPE_BLOB, 0})...)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.ReadPacket()
	if err != nil || len(resp) == 0 || resp[0] != mysql.OK_HEADER {
		t.Fatalf("execute with long data: %q, %v", resp, err)
	}
	r, err := c.Execute("SELECT stock FROM sku WHERE sku_id = 1")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.GetInt(0, 0); v != 11 {
		t.Errorf("stock of sku 1 = %d, want 11", v)
	}
	if got := settledMemory(p, base) - base; got != 0 {
		t.Errorf("%d bytes still held after the execute", got)
	}

	many, err := c.Prepare("SELECT stock FROM sku WHERE sku_id IN (" + strings.TrimSuffix(strings.Repeat("?,", 40), ",") + ")")
	if err != nil {
		t.Fatal(err)
	}
	base = p.srv.mem.used.Load()
	for i := 0; i < 40; i++ {
		sendLongData(t, c, many.ID, uint16(i), bytes.Repeat([]byte{'1'}, 60<<10))
	}
	args := make([]any, 40)
	for i := range args {
		args[i] = i + 1
	}
	_, err = many.Execute(args...)
	wantCode(t, err, erOutOfResources)
	r, err = many.Execute(args...)
	if err != nil {
		t.Fatalf("execute after the refused one: %v", err)
	}
	if len(r.Values) != 2 {
		t.Errorf("%d rows, want 2", len(r.Values))
	}
	if got := settledMemory(p, base) - base; got != 0 {
		t.Errorf("%d bytes still held after the executes", got)
	}
}

// TestPreparedPlanBudget: a prepared statement whose plan the budget
// cannot keep is analysed again at each execute, and still takes its
// locks and runs; closing statements gives their memory back.
func TestPreparedPlanBudget(t *testing.T) {
	p, db := limitsProxy(t, func(pc *rules.ProxyConfig) {
		pc.MaxAllowedPacket = 1 << 20
		pc.SessionMemory = 2 << 20
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	small, err := c.Prepare("UPDATE sku SET stock = stock - 1 WHERE sku_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	held := p.srv.mem.used.Load()
	if held == 0 {
		t.Fatal("a small prepared UPDATE's plan is not charged")
	}
	bigText := "UPDATE sku SET stock = stock - 1 WHERE sku_id = ? AND note <> '" + strings.Repeat("x", 20<<10) + "'"
	big, err := c.Prepare(bigText)
	if err != nil {
		t.Fatal(err)
	}
	// Its text is kept (and charged); its plan is not.
	held += int64(len(bigText)) + stmtOverhead
	if got := settledMemory(p, held); got != held {
		t.Errorf("a plan over the budget is charged: %d bytes held, want %d (the text)", got, held)
	}
	// Locks still apply: another session holding sku 2 makes it wait and time out.
	other, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Execute("BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Execute("SELECT stock FROM sku WHERE sku_id = 2 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	_, err = big.Execute(2)
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != erLockWaitTimeout {
		t.Fatalf("execute of the unpinned statement on a locked row: want 1205, got %v", err)
	}
	if _, err := other.Execute("ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if r, err := big.Execute(2); err != nil || r.AffectedRows != 1 {
		t.Fatalf("execute of the unpinned statement: %v", err)
	}
	if got := settledMemory(p, held); got != held {
		t.Errorf("%d bytes held after executing the large statement, want %d", got, held)
	}
	_ = big.Close()
	_ = small.Close()
	if _, err := c.Execute("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if got := settledMemory(p, 0); got != 0 {
		t.Errorf("%d bytes held after closing every statement", got)
	}
}

// settledMemory is the budget's charge once it reaches want, or after
// five seconds. A session returns a command's charges just after it has
// flushed the response, so a client that reads the counter at once can
// see them still held.
func settledMemory(p *testProxy, want int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := p.srv.mem.used.Load()
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLoginThrottleWire: parallel guesses for a throttled account are
// refused at once (1129) past the few that wait in line, and failed
// logins are audited at info with user and client, never the password.
func TestLoginThrottleWire(t *testing.T) {
	bed := testbedFor(t)
	core, logs := observer.New(zap.InfoLevel)
	cfg, err := rules.LoadBytes("t.yaml", []byte("proxy:\n  handshake_timeout: 10s\nusers:\n  - user: "+bed.User+
		"\n    password: \""+bed.Password+"\"\nbackends:\n  primary: "+bed.PrimaryAddr+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := serveProxy(t, bed, cfg, Options{Logger: zap.New(core), Registry: reg}, reg)
	const guess = "hunter2-guess"
	for i := 0; i < freeLogins; i++ {
		if _, err := client.Connect(p.addr, bed.User, guess, ""); err == nil {
			t.Fatal("a wrong password was accepted")
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.ConnectWithTimeout(p.addr, bed.User, guess, "", 20*time.Second)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	blocked := 0
	for err := range errs {
		if err != nil && strings.Contains(err.Error(), "1129") {
			blocked++
		}
	}
	if blocked < 30-maxWaiting {
		t.Errorf("%d of 30 parallel guesses refused at once, want at least %d", blocked, 30-maxWaiting)
	}
	if n := testutil.ToFloat64(p.srv.metrics.loginsThrottled); int(n) != blocked {
		t.Errorf("throttled logins counted %v, refused %d", n, blocked)
	}
	failed := logs.FilterMessage("login failed").All()
	if len(failed) < freeLogins {
		t.Fatalf("%d failed logins audited, want at least %d", len(failed), freeLogins)
	}
	for _, e := range failed {
		fields := e.ContextMap()
		if e.Level != zap.InfoLevel || fields["user"] != bed.User || fields["client"] != "127.0.0.1" {
			t.Errorf("audit entry %v %v", e.Level, fields)
		}
	}
	for _, e := range logs.All() {
		var b strings.Builder
		_, _ = io.WriteString(&b, e.Message)
		for k, v := range e.ContextMap() {
			_, _ = io.WriteString(&b, k+"="+strings.TrimSpace(strings.ReplaceAll(strings.ToLower(toString(v)), "\n", " ")))
		}
		if strings.Contains(b.String(), guess) {
			t.Fatalf("a password reached the log: %s", b.String())
		}
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case error:
		return x.Error()
	default:
		return ""
	}
}

// TestPrimaryGetsParamTypes: a statement first executed on a replica, then
// executed on the primary without binding its types (as clients do after
// the first execute), reaches the primary with the types bound: MariaDB
// 10.11 crashes on an execute that relies on types it was never given.
func TestPrimaryGetsParamTypes(t *testing.T) {
	bed := testbedFor(t)
	p := startProxy(t, func(c *rules.Config) { c.Backends.Replicas = []string{bed.ReplicaAddr} })
	db := freshDB(t, p)
	direct := p.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE item (id BIGINT PRIMARY KEY, name VARCHAR(64))", "INSERT INTO item VALUES (1, 'one'), (2, 'two')")
	testbed.Eventually(t, 30*time.Second, "the replica takes reads", func() bool {
		if !replicaReady(p.srv) {
			return false
		}
		// Not openDB: until the replica has applied CREATE DATABASE, a
		// login naming it fails, which is a reason to wait, not to fail.
		rdb, err := openDBErr(p.bed.DSN(bed.ReplicaAddr, db, ""))
		if err != nil {
			return false
		}
		defer rdb.Close()
		var n int
		return rdb.QueryRow("SELECT COUNT(*) FROM item").Scan(&n) == nil && n == 2
	})
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Prepare("SELECT name FROM item WHERE id IN (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	ll := []byte{mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_LONGLONG, 0}
	replicaReads := func() float64 { return testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "execute")) }
	before := replicaReads()
	r := bufio.NewReader(c.Conn.Conn)
	if _, err := c.Conn.Conn.Write(frame(0, execute(st.ID, 0, ll, le64(1), le64(2)))); err != nil {
		t.Fatal(err)
	}
	readResult(t, c, r)
	testbed.Eventually(t, 5*time.Second, "the first execute is served by the replica", func() bool { return replicaReads() > before })
	// A cursor keeps it on the primary; the types are not bound again.
	again := stmtID(mysql.COM_STMT_EXECUTE, st.ID, 1) // CURSOR_TYPE_READ_ONLY
	again = binary.LittleEndian.AppendUint32(again, 1)
	again = append(again, 0, 0) // null bitmap, new_params_bound_flag = 0
	again = append(append(again, le64(1)...), le64(2)...)
	if _, err := c.Conn.Conn.Write(frame(0, again)); err != nil {
		t.Fatal(err)
	}
	readResult(t, c, r)
	var one int
	if err := direct.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the primary is gone after the execute: %v", err)
	}
}

// readResult sends a sentinel query after the command just written and
// reads raw packets up to the sentinel's row, failing on an error packet
// before it.
func readResult(t *testing.T, c *client.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Conn.Conn.Write(frame(0, query("SELECT '"+fuzzSentinel+"'"))); err != nil {
		t.Fatal(err)
	}
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		if len(p) > 0 && p[0] == 0xff {
			t.Fatalf("error: %v", parseErrPayload(p))
		}
		if len(p) == len(fuzzSentinel)+1 && string(p[1:]) == fuzzSentinel {
			return
		}
	}
}

// TestLoginThrottleOff: with proxy.login_throttle: false a login is
// answered as MariaDB answers it however many failed before: 40 wrong
// passwords from one address, in parallel, each get 1045, and the correct
// one logs in at once; on by default, the same run refuses guesses with
// 1129, the correct password among them.
func TestLoginThrottleOff(t *testing.T) {
	bed := testbedFor(t)
	for _, throttle := range []bool{false, true} {
		yaml := "users:\n  - user: " + bed.User + "\n    password: \"" + bed.Password + "\"\nbackends:\n  primary: " + bed.PrimaryAddr + "\n"
		if !throttle {
			yaml = "proxy:\n  login_throttle: false\n" + yaml
		}
		cfg, err := rules.LoadBytes("t.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Proxy.LoginThrottle != throttle {
			t.Fatalf("proxy.login_throttle read as %v, want %v", cfg.Proxy.LoginThrottle, throttle)
		}
		reg := prometheus.NewRegistry()
		p := serveProxy(t, bed, cfg, Options{Logger: zap.NewNop(), Registry: reg}, reg)
		var wg sync.WaitGroup
		codes := make(chan uint16, 40)
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := client.ConnectWithTimeout(p.addr, bed.User, "hunter2-guess", "", 20*time.Second)
				var me *mysql.MyError
				if errors.As(err, &me) {
					codes <- me.Code
				} else {
					codes <- 0
				}
			}()
		}
		wg.Wait()
		close(codes)
		got := map[uint16]int{}
		for c := range codes {
			got[c]++
		}
		_, loginErr := client.ConnectWithTimeout(p.addr, bed.User, bed.Password, "", 20*time.Second)
		if throttle {
			if got[1129] == 0 {
				t.Errorf("throttle on: answers %v to 40 guesses, want some 1129", got)
			}
			continue
		}
		if got[1045] != 40 {
			t.Errorf("throttle off: answers %v to 40 guesses, want 40 times 1045", got)
		}
		if loginErr != nil {
			t.Errorf("throttle off: the correct password after 40 guesses: %v", loginErr)
		}
		if n := testutil.ToFloat64(p.srv.metrics.loginsThrottled); n != 0 {
			t.Errorf("throttle off: %v logins counted throttled", n)
		}
	}
}
